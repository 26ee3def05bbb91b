"""The asyncio shell shared by the broker and controller processes.

It owns everything the sans-IO core must not touch: the TCP server, one
outgoing connection per peer, the clock and the single timer, and the process
log. Each input (a frame, a timer, a lost connection) goes to the core with
the current time; the returned actions are carried out in order. Disk actions
are handed to ``apply_disk`` of the subclass (broker: ``replica/storage.py``;
controller: its metadata file). A bad frame never reaches the core as an
exception: it is answered with INVALID_REQUEST, and an unreadable stream is
closed.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import traceback
from typing import Any

from . import protocol as P
from .core import actions as A
from .wire import MAX_FRAME_BYTES, FrameError, encode_frame, error_response, read_frame

CONNECT_TIMEOUT_S = 5.0


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def log_line(name: str, text: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
    print(f"{stamp} {name} {text}", file=sys.stderr, flush=True)


def parse_address(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} must look like HOST:PORT, got {text!r}")
    return host, int(port)


class Coalescer:
    """Frames written in one event-loop turn leave in one socket write: when a HW
    advance completes many parked requests, that is one syscall, not many."""

    def __init__(self):
        self.frames: list[bytes] = []
        self.writer: asyncio.StreamWriter | None = None

    def add(self, frame: bytes) -> None:
        if not self.frames:
            asyncio.get_running_loop().call_soon(self.flush)
        self.frames.append(frame)

    def flush(self) -> None:
        frames, self.frames = self.frames, []
        if frames and self.writer is not None and not self.writer.is_closing():
            self.writer.write(b"".join(frames))


class Connection:
    """One accepted client/peer connection; the core sees it as an opaque handle."""
    __slots__ = ("writer", "peer", "closed", "out")

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self.closed = False
        self.out = Coalescer()
        self.out.writer = writer

    def send(self, message: dict) -> None:
        if self.closed:
            return
        try:
            frame = encode_frame(message)
        except FrameError as e:
            frame = encode_frame(error_response(message.get("corr"), P.UNKNOWN_SERVER_ERROR, str(e)))
        self.out.add(frame)

    def __repr__(self) -> str:
        return f"conn{self.peer}"


class Peer:
    """The outgoing connection to one peer: connects on first use, forwards the
    answers to the core, and reports a broken connection once."""

    def __init__(self, shell: "Shell", dest: Any):
        self.shell = shell
        self.dest = dest
        self.writer: asyncio.StreamWriter | None = None
        self.queue: list[dict] = []
        self.task: asyncio.Task | None = None
        self.out = Coalescer()

    def send(self, message: dict) -> None:
        if self.writer is not None:
            try:
                self.out.add(encode_frame(message))
            except FrameError as e:
                self.shell.log(f"cannot encode message to {self.dest}: {e}")
            return
        self.queue.append(message)
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        address = self.shell.address_of(self.dest)
        writer = None
        try:
            if address is None:
                raise OSError(f"no address known for {self.dest}")
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), CONNECT_TIMEOUT_S)
            self.writer = writer
            self.out.writer = writer
            queued, self.queue = self.queue, []
            for message in queued:
                writer.write(encode_frame(message))
            while True:
                message = await read_frame(reader)
                if message is None:
                    break
                self.shell.feed(lambda now, m=message: self.shell.core.on_response(self.dest, m, now))
        except (OSError, ConnectionError, FrameError, asyncio.TimeoutError) as e:
            if self.shell.verbose:
                self.shell.log(f"connection to {self.dest} ended: {e}")
        finally:
            self.writer = None
            self.out.writer = None
            self.out.frames = []
            self.queue = []
            self.task = None
            if writer is not None:
                writer.close()
            if not self.shell.stopping:
                self.shell.feed(lambda now: self.shell.core.on_peer_failed(self.dest, now))

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()


class Shell:
    """Run a core behind a TCP server until SIGTERM."""

    name = "replica"

    def __init__(self, core: Any, listen: tuple[str, int], verbose: bool = False):
        self.core = core
        self.listen = listen
        self.verbose = verbose
        self.peers: dict[Any, Peer] = {}
        self.connections: set[Connection] = set()
        self.stopping = False
        self._timer: asyncio.TimerHandle | None = None
        self._stop = asyncio.Event()

    # ---- subclass hooks
    def address_of(self, dest: Any) -> tuple[str, int] | None:
        raise NotImplementedError

    def apply_disk(self, action: Any) -> None:
        raise NotImplementedError

    def log(self, text: str) -> None:
        log_line(self.name, text)

    # ---- core plumbing
    def feed(self, call) -> bool:
        """Give one input to the core and carry out what it returns. An internal
        error is logged with its traceback and the process keeps serving."""
        try:
            actions = call(now_ms())
        except Exception:  # noqa: BLE001 - one bad input must not take the process down
            self.log("internal error:\n" + traceback.format_exc())
            return False
        self.apply(actions)
        return True

    def apply(self, actions: list) -> None:
        for a in actions:
            if isinstance(a, A.Reply):
                a.conn.send(a.message)
            elif isinstance(a, A.Send):
                peer = self.peers.get(a.dest)
                if peer is None:
                    peer = self.peers[a.dest] = Peer(self, a.dest)
                peer.send(a.message)
            elif isinstance(a, A.SetTimer):
                if self._timer is not None:
                    self._timer.cancel()
                delay = max(0.0, (a.at - now_ms()) / 1000)
                self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)
            elif isinstance(a, A.Log):
                self.log(a.text)
            else:
                self.apply_disk(a)

    def _on_timer(self) -> None:
        self._timer = None
        if not self.feed(self.core.on_timer) and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(1.0, self._on_timer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(writer)
        self.connections.add(conn)
        try:
            while not self.stopping:
                try:
                    message = await read_frame(reader, MAX_FRAME_BYTES)
                except FrameError as e:
                    conn.send(error_response(None, P.INVALID_REQUEST, str(e)))
                    if "exceeds the maximum" in str(e):
                        break
                    continue
                if message is None:
                    break
                corr = message.get("corr")
                if isinstance(corr, bool) or not isinstance(corr, int):
                    conn.send(error_response(None, P.INVALID_REQUEST, "field 'corr' must be an integer"))
                    continue
                if not isinstance(message.get("api"), str):
                    conn.send(error_response(corr, P.INVALID_REQUEST, "field 'api' must be a string"))
                    continue
                self.feed(lambda now, m=message: self.core.on_request(conn, m, now))
                if writer.transport.get_write_buffer_size() > (1 << 20):
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass   # shutting down; finishing quietly avoids asyncio's noise about cancelled handlers
        finally:
            conn.out.flush()
            conn.closed = True
            self.connections.discard(conn)
            writer.close()
            if not self.stopping:
                self.feed(lambda now: self.core.on_connection_closed(conn, now))

    async def run(self, start_call) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        server = await asyncio.start_server(self._serve, *self.listen)
        self.log(f"listening on {self.listen[0]}:{self.listen[1]}")
        self.feed(start_call)
        await self._stop.wait()
        self.stopping = True
        self.log("SIGTERM: shutting down")
        if hasattr(self.core, "shutdown"):
            self.feed(self.core.shutdown)
        server.close()
        if self._timer is not None:
            self._timer.cancel()
        for peer in self.peers.values():
            peer.close()
        for conn in list(self.connections):
            conn.writer.close()
        self.close()
        return 0

    def close(self) -> None:
        """Release resources (subclasses close their files)."""

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

import argparse
import asyncio
import signal
import sys
import time
import traceback
from typing import Any

from . import protocol as P
from .core import actions as A
from .wire import (MAX_FRAME_BYTES, MAX_REQUEST_NESTING, FrameError, FrameProtocol, ReceiveBudget,
                   encode_frame, error_response)

CONNECT_TIMEOUT_S = 5.0
WRITE_BUFFER_HIGH = 1 << 20      # stop reading a connection whose unsent answers exceed this


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def log_line(name: str, text: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
    print(f"{stamp} {name} {text}", file=sys.stderr, flush=True)


def process_arguments(prog: str) -> argparse.ArgumentParser:
    """The command-line options every replica process takes (docs/interfaces.md);
    each process adds its own (the broker: --id, --controller)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--listen", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--era", choices=P.ERAS, required=True)
    parser.add_argument("--cluster-secret-file", help="a file holding the cluster's secret (required)")
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[])
    return parser


def read_cluster_secret(path: str | None) -> str:
    """The cluster's secret: the first line of ``--cluster-secret-file``.

    The controller and every broker of a cluster get the same file; the
    secret travels in every inter-broker request (follower fetches,
    registration, heartbeats, ISR changes, the controller's pushes), and
    requests without it are not the cluster's (Kafka's ClusterAction). A
    process without a secret would be a cluster anyone can join, so it does
    not start: ValueError with a one-line message.
    """
    fix = "give every process of the cluster the same file, e.g. `openssl rand -hex 16 > FILE`"
    if not path:
        raise ValueError(f"--cluster-secret-file is missing: {fix}")
    try:
        with open(path, encoding="utf-8") as f:
            secret = f.readline().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--cluster-secret-file {path} cannot be read ({e}): {fix}") from None
    if not secret:
        raise ValueError(f"--cluster-secret-file {path} is empty: {fix}")
    return secret


def parse_address(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} must look like HOST:PORT, got {text!r}")
    return host, int(port)


class ServerProtocol(FrameProtocol):
    """One accepted client/peer connection; the core sees it as an opaque handle.

    A ``wire.FrameProtocol`` (not StreamReader + read_frame): frames are parsed
    straight from the receive buffer and every answer written in one
    event-loop turn leaves in one ``send``, which halves the server CPU per
    request. The envelope (``corr``, ``api``) is checked here so that the core
    only sees well-formed requests. Requests are bounded in nesting, their
    partial frames count against the shell's receive budget, and a sender that
    stalls inside a frame is dropped after ``connections.max.idle.ms``.
    """

    def __init__(self, shell: "Shell"):
        super().__init__(self._on_request, on_close=self._on_lost, on_bad_frame=self._on_bad_frame,
                         max_frame_bytes=MAX_FRAME_BYTES, max_depth=MAX_REQUEST_NESTING,
                         budget=shell.receive_budget, idle_timeout=shell.idle_timeout_s)
        self.shell = shell
        self.peer = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.peer = transport.get_extra_info("peername")
        # Backpressure as before: stop reading a client that does not read its answers.
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.shell.connections.add(self)

    def pause_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.transport.is_closing() and not self._reading_paused:
            self.transport.resume_reading()

    def send(self, message: dict) -> None:
        if self.closed:
            return
        try:
            frame = encode_frame(message)
        except FrameError as e:
            frame = encode_frame(error_response(message.get("corr"), P.UNKNOWN_SERVER_ERROR, str(e)))
        if len(frame) - 4 > MAX_FRAME_BYTES:     # the peer would drop the connection on it
            frame = encode_frame(error_response(message.get("corr"), P.UNKNOWN_SERVER_ERROR,
                                                f"answer of {len(frame) - 4} bytes exceeds the frame limit"))
        self.send_frame(frame)

    def _on_request(self, message: dict) -> None:
        shell = self.shell
        if shell.stopping:
            return
        corr = message.get("corr")
        if isinstance(corr, bool) or not isinstance(corr, int):
            self.send(error_response(None, P.INVALID_REQUEST, "field 'corr' must be an integer"))
            return
        if not isinstance(message.get("api"), str):
            self.send(error_response(corr, P.INVALID_REQUEST, "field 'api' must be a string"))
            return
        shell.feed_request(self, message)

    def _on_bad_frame(self, error: FrameError) -> None:
        # Not JSON / not an object / too deep / a non-finite number: answered (to the
        # request's corr when it could be read), the stream stays aligned. Oversized:
        # answered, then FrameProtocol closes the connection (it cannot resynchronise).
        corr = error.corr if isinstance(error.corr, int) and not isinstance(error.corr, bool) else None
        code = P.INVALID_RECORD if error.kind == "value" and error.api == P.PRODUCE else P.INVALID_REQUEST
        self.send(error_response(corr, code, str(error)))

    def _on_lost(self, exc: BaseException | None) -> None:
        shell = self.shell
        shell.connections.discard(self)
        if not shell.stopping:
            shell.feed(lambda now: shell.core.on_connection_closed(self, now))

    def __repr__(self) -> str:
        return f"conn{self.peer}"


class Peer:
    """The outgoing connection to one peer: connects on first use, forwards the
    answers to the core, and reports a broken connection (or a failed connect) once."""

    def __init__(self, shell: "Shell", dest: Any):
        self.shell = shell
        self.dest = dest
        self.protocol: FrameProtocol | None = None
        self.queue: list[dict] = []
        self.task: asyncio.Task | None = None

    def send(self, message: dict) -> None:
        if self.protocol is not None:
            try:
                self.protocol.send_frame(encode_frame(message))
            except FrameError as e:
                self.shell.log(f"cannot encode message to {self.dest}: {e}")
            return
        self.queue.append(message)
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        shell = self.shell
        address = shell.address_of(self.dest)
        protocol = FrameProtocol(self._on_response, max_frame_bytes=MAX_FRAME_BYTES,
                                 on_close=lambda exc: self._on_lost(protocol, exc),
                                 on_bad_frame=lambda e: self._on_bad_frame(protocol, e))
        try:
            if address is None:
                raise OSError(f"no address known for {self.dest}")
            await asyncio.wait_for(asyncio.get_running_loop().create_connection(lambda: protocol, *address),
                                   CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            self.task = None
            self.queue = []
            if shell.verbose:
                shell.log(f"connection to {self.dest} ended: {e}")
            if not shell.stopping:
                shell.feed(lambda now: shell.core.on_peer_failed(self.dest, now))
            return
        self.task = None
        if protocol.closed:              # lost again before we got here: already reported
            return
        self.protocol = protocol
        queued, self.queue = self.queue, []
        for message in queued:
            self.send(message)

    def _on_response(self, message: dict) -> None:
        shell = self.shell
        dest = self.dest
        shell.feed(lambda now: shell.core.on_response(dest, message, now))

    def _on_bad_frame(self, protocol: FrameProtocol, error: FrameError) -> None:
        if self.shell.verbose:
            self.shell.log(f"bad frame from {self.dest}: {error}")
        protocol.abort()                 # as before: an unreadable answer ends the connection

    def _on_lost(self, protocol: FrameProtocol, exc: BaseException | None) -> None:
        if self.protocol is protocol:
            self.protocol = None
        self.queue = []
        shell = self.shell
        if shell.verbose:
            shell.log(f"connection to {self.dest} ended: {exc}")
        if not shell.stopping:
            shell.feed(lambda now: shell.core.on_peer_failed(self.dest, now))

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.protocol is not None:
            self.protocol.close()


class Shell:
    """Run a core behind a TCP server until SIGTERM."""

    name = "replica"

    def __init__(self, core: Any, listen: tuple[str, int], verbose: bool = False):
        self.core = core
        self.listen = listen
        self.verbose = verbose
        self.peers: dict[Any, Peer] = {}
        self.connections: set[ServerProtocol] = set()
        self.receive_budget = ReceiveBudget(core.config["queued.max.request.bytes"])
        self.idle_timeout_s = core.config["connections.max.idle.ms"] / 1000
        self.stopping = False
        self._timer: asyncio.TimerHandle | None = None
        self._stop = asyncio.Event()
        self.exit_code = 0

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

    def feed_request(self, conn: "ServerProtocol", message: dict) -> None:
        """``feed`` for the hot path: one request from a connection."""
        try:
            actions = self.core.on_request(conn, message, now_ms())
        except Exception:  # noqa: BLE001 - one bad input must not take the process down
            self.log("internal error:\n" + traceback.format_exc())
            return
        self.apply(actions)

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
            elif isinstance(a, A.Exit):
                self.log(f"error: {a.text}")
                self.exit_code = 2
                self._stop.set()
            else:
                self.apply_disk(a)

    def _on_timer(self) -> None:
        self._timer = None
        if not self.feed(self.core.on_timer) and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(1.0, self._on_timer)

    async def run(self, start_call) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        server = await loop.create_server(lambda: ServerProtocol(self), *self.listen)
        self.log(f"listening on {self.listen[0]}:{self.listen[1]}")
        self.feed(start_call)
        await self._stop.wait()
        self.stopping = True
        self.log("SIGTERM: shutting down" if self.exit_code == 0 else "shutting down")
        if hasattr(self.core, "shutdown"):
            self.feed(self.core.shutdown)
        server.close()
        if self._timer is not None:
            self._timer.cancel()
        for peer in self.peers.values():
            peer.close()
        for conn in list(self.connections):
            conn.close()
        self.close()
        return self.exit_code

    def close(self) -> None:
        """Release resources (subclasses close their files)."""

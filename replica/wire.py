"""Wire framing shared by brokers, the controller and the client (standard library only).

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON
holding one object. Requests are ``{"api": NAME, "corr": n, ...}`` and responses
``{"corr": n, "error": null | CODE, ...}``. Responses may come back in any
order on a connection; ``corr`` matches them to requests, so one connection
can carry many outstanding requests (an acks=all produce waits for the HW
without blocking the fetches behind it).

``serve_connection`` is the server side: it reads frames, validates the
envelope, dispatches to one handler per API and writes the answers. Bad input
never reaches a handler: a frame that is not JSON or not an object gets an
``INVALID_REQUEST`` answer, an unknown API ``UNSUPPORTED_API``, and an
oversized or truncated frame closes the connection (the stream cannot be
resynchronised). Handlers signal protocol errors with ``RequestError`` and
validate fields with ``field``; a wrongly typed field becomes
``INVALID_REQUEST`` instead of an exception in the server.

Encoding and decoding agree: what ``decode_frame`` accepts, ``encode_frame``
can write back. JSON's non-numbers (``NaN``, ``Infinity``, ``1e999``) are
refused both ways, and a server refuses requests nested deeper than
``MAX_REQUEST_NESTING`` (a produced value then stays far below the
interpreter's recursion limit in every reply that carries it). A refused
frame's ``FrameError`` carries the request's ``corr`` and ``api`` when they
can be found, so the answer reaches the request that caused it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import struct
from typing import Any, Awaitable, Callable, Mapping

__all__ = [
    "MAX_FRAME_BYTES", "FrameError", "RequestError", "encode_frame", "decode_frame",
    "read_frame", "write_frame", "error_response", "field", "serve_connection",
    "Handler", "FrameProtocol", "ReceiveBudget", "MAX_REQUEST_NESTING",
]

MAX_FRAME_BYTES = 8 << 20
MAX_REQUEST_NESTING = 64          # arrays/objects inside each other in one request
_LENGTH = struct.Struct(">I")

log = logging.getLogger("replica.wire")


class FrameError(Exception):
    """A frame that cannot be a message: oversized, not UTF-8 JSON, not a JSON
    object, nested too deeply or holding a non-finite number.

    ``corr`` and ``api`` are the refused request's, when they could be read
    (None otherwise); ``kind`` is "value" when only a value is at fault (a
    non-finite number), "frame" otherwise.
    """

    def __init__(self, message: str, corr: Any = None, api: Any = None, kind: str = "frame"):
        super().__init__(message)
        self.corr = corr
        self.api = api
        self.kind = kind


class RequestError(Exception):
    """Raised by a handler to answer ``{"error": code, "message": message}``."""

    def __init__(self, code: str, message: str = ""):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)   # reused: json.dumps with options builds one per call


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """Length prefix plus compact JSON; raises FrameError for a non-dict or unencodable message."""
    # type() first: isinstance against typing.Mapping costs ~2 us, paid on every message.
    if type(message) is not dict and not isinstance(message, Mapping):
        raise FrameError(f"a frame must hold a JSON object, not {type(message).__name__}")
    try:
        body = _ENCODER.encode(message).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise FrameError(f"message cannot be encoded as JSON: {e}") from None
    return _LENGTH.pack(len(body)) + body


class _NonFinite(ValueError):
    """A JSON number that is no float (NaN, Infinity, 1e999): encode_frame could not write it back."""


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:             # inf - inf and nan - nan are NaN
        raise _NonFinite(f"{text[:40]} is not a finite number")
    return value


# One decoder, built once (json.loads with hooks would build one per call).
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")
_ENVELOPE_KEY = re.compile(rb'"(corr|api)"\s*:\s*(-?\d{1,18}(?![\d.eE])|"[^"\\]{0,100}")')


def _nesting_within(body: bytes, limit: int) -> bool:
    """True if no array/object in the JSON text nests deeper than ``limit``.

    Runs at C speed (re and bytes methods) instead of a per-character loop:
    strip the strings, keep the brackets, remove the innermost pairs once per
    level. A text with at most ``limit`` openers is within the limit without
    looking further (the common case: requests carry few arrays).
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return True
    if b'"' in body:
        body = _STRING.sub(b"", body)
    brackets = body.translate(None, _NOT_BRACKETS)
    for _ in range(limit + 1):
        if not brackets:
            return True
        fewer = _INNERMOST.sub(b"", brackets)
        if len(fewer) == len(brackets):  # unbalanced: not JSON either
            return False
        brackets = fewer
    return not brackets


def _envelope(body: bytes) -> dict:
    """Best effort ``corr`` and ``api`` of a refused frame: the first such keys at the top level."""
    found: dict = {}
    for m in itertools.islice(_ENVELOPE_KEY.finditer(body), 16):
        name = m.group(1).decode()
        if name in found:
            continue
        prefix = _STRING.sub(b"", body[:m.start()])
        if prefix.count(b"{") + prefix.count(b"[") - prefix.count(b"}") - prefix.count(b"]") != 1:
            continue
        found[name] = json.loads(m.group(2))
        if len(found) == 2:
            break
    return found


def decode_frame(body: bytes | bytearray, max_depth: int | None = None) -> dict:
    """Parse a frame body into a dict; raises FrameError otherwise.

    ``max_depth`` bounds the nesting of arrays and objects (servers pass
    MAX_REQUEST_NESTING); without it only the interpreter's recursion limit does.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FrameError(f"frame is not UTF-8 JSON: {e}") from None
    if max_depth is not None and not _nesting_within(body, max_depth):
        raise FrameError(f"frame nests arrays/objects deeper than {max_depth} levels",
                         **_envelope(body))
    try:
        message = _DECODER.decode(text)
    except _NonFinite as e:
        raise FrameError(f"frame holds a non-finite number: {e}", kind="value", **_envelope(body)) from None
    except ValueError as e:
        raise FrameError(f"frame is not UTF-8 JSON: {e}") from None
    except RecursionError:
        raise FrameError("frame nests arrays/objects too deeply", **_envelope(body)) from None
    if not isinstance(message, dict):
        raise FrameError(f"frame holds a JSON {type(message).__name__}, expected an object")
    return message


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES,
                     max_depth: int | None = None) -> dict | None:
    """Read one frame. Returns None on a clean end of stream (between frames).

    Raises FrameError for an oversized or undecodable frame and
    ConnectionError when the stream ends in the middle of a frame.
    """
    try:
        header = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise ConnectionError("connection closed inside a frame header") from None
    (length,) = _LENGTH.unpack(header)
    if length > max_bytes:
        raise FrameError(f"frame of {length} bytes exceeds the maximum of {max_bytes}")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as e:
        raise ConnectionError(f"connection closed after {len(e.partial)} of {length} frame bytes") from None
    return decode_frame(body, max_depth)


async def write_frame(writer: asyncio.StreamWriter, message: Mapping[str, Any]) -> None:
    """Write one frame and wait for the transport buffer to drain."""
    writer.write(encode_frame(message))
    await writer.drain()


def error_response(corr: Any, code: str, message: str = "") -> dict:
    """The response envelope for an error (``corr`` None when the request had none)."""
    response = {"corr": corr, "error": code}
    if message:
        response["message"] = message
    return response


_MISSING = object()


def field(request: Mapping[str, Any], name: str, kind: type | tuple[type, ...],
          default: Any = _MISSING, *, minimum: int | None = None) -> Any:
    """A typed request field; raises ``RequestError("INVALID_REQUEST")`` naming the field.

    ``bool`` is not accepted where ``int`` is asked for (JSON true is not a number).
    """
    value = request.get(name, _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise RequestError("INVALID_REQUEST", f"missing field {name!r}")
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        ok = False
    else:
        ok = isinstance(value, kinds)
    if not ok:
        expected = " or ".join(k.__name__ for k in kinds)
        raise RequestError("INVALID_REQUEST", f"field {name!r} must be {expected}, got {json.dumps(value)[:80]}")
    if minimum is not None and isinstance(value, int) and value < minimum:
        raise RequestError("INVALID_REQUEST", f"field {name!r} must be >= {minimum}, got {value}")
    return value


Handler = Callable[[dict], Awaitable[dict]]


async def _answer(request: dict, handlers: Mapping[str, Handler]) -> dict:
    corr = request.get("corr")
    if isinstance(corr, bool) or not isinstance(corr, int):
        return error_response(None if not isinstance(corr, (int, str)) else corr,
                              "INVALID_REQUEST", "field 'corr' must be an integer")
    api = request.get("api")
    if not isinstance(api, str):
        return error_response(corr, "INVALID_REQUEST", "field 'api' must be a string")
    handler = handlers.get(api)
    if handler is None:
        return error_response(corr, "UNSUPPORTED_API", f"unknown api {api[:80]!r}")
    try:
        response = await handler(request)
    except RequestError as e:
        return error_response(corr, e.code, e.message)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        # A handler that did not validate a field: still the client's fault.
        log.warning("api %s: bad request %r: %r", api, request, e)
        return error_response(corr, "INVALID_REQUEST", f"{type(e).__name__}: {e}")
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 - one bad request must not kill the server
        log.exception("api %s: handler failed", api)
        return error_response(corr, "UNKNOWN_SERVER_ERROR", f"{type(e).__name__}: {e}")
    response = dict(response)
    response["corr"] = corr
    response.setdefault("error", None)
    return response


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           handlers: Mapping[str, Handler], *, max_frame_bytes: int = MAX_FRAME_BYTES,
                           concurrent: bool = True) -> None:
    """Serve one connection until the peer closes it or sends an unrecoverable frame.

    With ``concurrent`` (the default) each request runs in its own task and
    its response is written when ready, so a parked request (a long-poll fetch,
    an acks=all produce) does not hold up later ones. Use it as (part of) the
    ``asyncio.start_server`` callback.
    """
    peer = writer.get_extra_info("peername")
    tasks: set[asyncio.Task] = set()
    write_lock = asyncio.Lock()

    async def respond(message: dict) -> None:
        try:
            frame = encode_frame(message)
        except FrameError as e:
            log.error("unencodable response %r: %s", message, e)
            frame = encode_frame(error_response(message.get("corr"), "UNKNOWN_SERVER_ERROR", str(e)))
        async with write_lock:
            writer.write(frame)
            await writer.drain()

    async def run(request: dict) -> None:
        try:
            await respond(await _answer(request, handlers))
        except (ConnectionError, OSError):
            pass

    try:
        while True:
            try:
                request = await read_frame(reader, max_frame_bytes, MAX_REQUEST_NESTING)
            except FrameError as e:
                if "exceeds the maximum" in str(e):
                    log.warning("closing connection from %s: %s", peer, e)
                    await respond(error_response(None, "INVALID_REQUEST", str(e)))
                    break
                await respond(error_response(e.corr, "INVALID_REQUEST", str(e)))
                continue
            if request is None:
                break
            if concurrent:
                task = asyncio.get_running_loop().create_task(run(request))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            else:
                await run(request)
    except (ConnectionError, OSError) as e:
        log.info("connection from %s ended: %s", peer, e)
    finally:
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class ReceiveBudget:
    """Bytes of receive buffer beyond the base size, summed over the
    connections of one server (Kafka's ``queued.max.request.bytes``).

    A connection that holds part of a frame while the sum is over ``limit``
    stops reading until the sum falls below it (Kafka mutes such channels);
    the kernel's socket buffers then hold the rest and the sender waits.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self._paused: set["FrameProtocol"] = set()

    def over(self) -> bool:
        return self.held > self.limit

    def pause(self, protocol: "FrameProtocol") -> None:
        self._paused.add(protocol)

    def forget(self, protocol: "FrameProtocol") -> None:
        self._paused.discard(protocol)

    def adjust(self, delta: int) -> None:
        self.held += delta
        if delta < 0 and self._paused and not self.over():
            paused, self._paused = self._paused, set()
            for protocol in paused:
                protocol._resume_reading()


class FrameProtocol(asyncio.BufferedProtocol):
    """A frame-level asyncio protocol: the fast path for busy connections.

    Compared with ``StreamReader`` + ``read_frame`` it receives straight into
    one reusable buffer (``recv_into``; no 256 KiB allocation per read), parses
    every complete frame of a read in one go, and coalesces the frames written
    during one event-loop iteration into a single ``send``. On a loaded
    2-core machine the per-message syscall and task-switch cost is what limits
    acks=all throughput.

    The buffer grows with the bytes that arrive (doubling), never to the
    length a frame header merely declares, and returns to the base size after
    a large frame; with a ``budget`` the growth is counted against it. With
    ``idle_timeout`` (seconds) a connection that holds part of a frame and
    receives nothing for that long is closed (a stalled sender).

    Callbacks (plain functions, called on the event loop):
        on_message(dict): one decoded frame.
        on_bad_frame(FrameError): a frame that is not a JSON object; the
            stream stays aligned, so reading continues.
        on_close(exc | None): the connection is gone (after an oversized frame
            the protocol closes it itself and passes the FrameError).
    """

    BASE_BYTES = 64 * 1024
    SHRINK_ABOVE = 1 << 20               # a buffer grown past this returns to the base size when empty

    def __init__(self, on_message: Callable[[dict], None],
                 on_close: Callable[[BaseException | None], None] | None = None,
                 on_bad_frame: Callable[[FrameError], None] | None = None,
                 max_frame_bytes: int = MAX_FRAME_BYTES, buffer_bytes: int = BASE_BYTES,
                 max_depth: int | None = None, budget: ReceiveBudget | None = None,
                 idle_timeout: float | None = None):
        self._on_message = on_message
        self._on_close = on_close
        self._on_bad_frame = on_bad_frame
        self.max_frame_bytes = max_frame_bytes
        self.max_depth = max_depth
        self._base = buffer_bytes
        self._buf = bytearray(buffer_bytes)
        self._start = 0                  # first unparsed byte
        self._end = 0                    # end of received data
        self._budget = budget
        self._counted = 0                # bytes of self._buf counted in the budget
        self._idle_timeout = idle_timeout
        self._idle_timer: asyncio.TimerHandle | None = None
        self._last_read = 0.0
        self._reading_paused = False
        self._outbox: list[bytes] = []
        self._flush_scheduled = False
        self.transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        self._close_reason: BaseException | None = None

    # -------------------------------------------------------------- receiving
    def connection_made(self, transport) -> None:
        self.transport = transport
        self._loop = asyncio.get_running_loop()     # kept: each lookup costs a getpid() syscall

    def _replace_buffer(self, size: int) -> None:
        """A fresh buffer holding the pending bytes (never resize one that a memoryview may still export)."""
        pending = self._end - self._start
        new = bytearray(size)
        new[:pending] = self._buf[self._start:self._end]
        self._buf, self._start, self._end = new, 0, pending
        if self._budget is not None:
            counted = max(0, size - self._base)
            delta, self._counted = counted - self._counted, counted
            self._budget.adjust(delta)

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self._buf) - self._end < 4096:
            pending = self._end - self._start
            size = max(self._base, 2 * pending)          # grow with what arrived, doubling
            if pending >= 4:                             # ... but not past what the frame needs
                (length,) = _LENGTH.unpack_from(self._buf, self._start)
                size = min(size, length + 4 + 4096)
            self._replace_buffer(max(size, pending + 4096))
        return memoryview(self._buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        buf, pos, end = self._buf, self._start, self._end
        while end - pos >= 4:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if length > self.max_frame_bytes:
                self._start = pos
                error = FrameError(f"frame of {length} bytes exceeds the maximum of {self.max_frame_bytes}")
                self._close_reason = error
                if self._on_bad_frame is not None:
                    self._on_bad_frame(error)
                self.close()
                return
            if end - pos - 4 < length:
                break
            body = buf[pos + 4: pos + 4 + length]       # one copy; decode_frame takes any bytes-like
            pos += 4 + length
            try:
                message = decode_frame(body, self.max_depth)
            except FrameError as e:
                if self._on_bad_frame is not None:
                    self._on_bad_frame(e)
                continue
            self._on_message(message)
            if self.closed:
                return
        if pos == end:
            self._start = self._end = 0
            if len(self._buf) > self.SHRINK_ABOVE:
                self._replace_buffer(self._base)
            return
        self._start = pos
        # Part of a frame is held: watch for a stalled sender and for the budget.
        if self._idle_timeout is not None:
            self._last_read = self._loop.time()
            if self._idle_timer is None:
                self._idle_timer = self._loop.call_at(self._last_read + self._idle_timeout, self._check_idle)
        budget = self._budget
        if budget is not None and self._counted and budget.over() and not self._reading_paused:
            self._reading_paused = True
            budget.pause(self)
            if self.transport is not None:
                self.transport.pause_reading()

    def _resume_reading(self) -> None:
        self._reading_paused = False
        if self.transport is not None and not self.closed and not self.transport.is_closing():
            self.transport.resume_reading()

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self.closed or self._end == self._start:
            return
        due = self._last_read + self._idle_timeout
        if self._loop.time() < due:
            self._idle_timer = self._loop.call_at(due, self._check_idle)
            return
        self._close_reason = ConnectionError(
            f"idle for {self._idle_timeout:g}s inside a frame ({self._end - self._start} bytes held)")
        self.abort()

    def eof_received(self) -> bool:
        self._flush()                    # answers to what was read before the EOF still leave
        return False                     # close the transport; connection_lost follows

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self._outbox.clear()
        if self._end > self._start and exc is None and self._close_reason is None:
            exc = ConnectionError(f"connection closed inside a frame ({self._end - self._start} bytes pending)")
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._buf = bytearray()          # the memory goes now, not when the last reference does
        self._start = self._end = 0
        if self._budget is not None:
            self._budget.forget(self)
            if self._counted:
                counted, self._counted = self._counted, 0
                self._budget.adjust(-counted)
        if self._on_close is not None:
            self._on_close(exc or self._close_reason)

    # ---------------------------------------------------------------- sending
    def send(self, message: Mapping[str, Any]) -> None:
        """Queue one frame; all frames queued in this loop iteration leave in one write."""
        self.send_frame(encode_frame(message))

    def send_frame(self, frame: bytes) -> None:
        if self.closed or self.transport is None:
            return
        self._outbox.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._outbox and not self.closed and self.transport is not None:
            data = self._outbox[0] if len(self._outbox) == 1 else b"".join(self._outbox)
            self._outbox.clear()
            self.transport.write(data)

    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def close(self) -> None:
        """Send what is queued, then close."""
        if self.transport is not None and not self.transport.is_closing():
            self._flush()
            self.transport.close()
        self.closed = True

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.closed = True

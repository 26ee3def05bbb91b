"""Wire framing over real loopback TCP: frames, envelope validation, bad input, concurrency."""

import asyncio
import struct

import pytest

from replica.wire import (
    MAX_REQUEST_NESTING, FrameError, FrameProtocol, RequestError, decode_frame, encode_frame, field,
    read_frame, serve_connection, write_frame,
)

pytestmark = pytest.mark.unit


def test_encode_decode_round_trip():
    frame = encode_frame({"api": "Metadata", "corr": 1, "topics": ["log"], "v": "é"})
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    assert decode_frame(frame[4:]) == {"api": "Metadata", "corr": 1, "topics": ["log"], "v": "é"}


@pytest.mark.parametrize("body", [b"\xff\xfe", b"{not json", b"[1, 2]", b"17", b"null"])
def test_decode_rejects_non_objects(body):
    with pytest.raises(FrameError):
        decode_frame(body)


def test_encode_rejects_non_objects_and_nan():
    with pytest.raises(FrameError):
        encode_frame([1])
    with pytest.raises(FrameError):
        encode_frame({"x": float("nan")})


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_decode_refuses_what_encode_refuses(number):
    """A non-finite number is refused on the way in as on the way out, naming the request."""
    body = f'{{"api":"Produce","values":[1,{{"x":[{number}]}}],"corr":12}}'.encode()
    with pytest.raises(FrameError) as caught:
        decode_frame(body)
    assert (caught.value.corr, caught.value.api, caught.value.kind) == (12, "Produce", "value")
    assert decode_frame(b'{"v":[1.5,-2e300,"NaN"]}') == {"v": [1.5, -2e300, "NaN"]}


def test_decode_bounds_nesting_and_finds_the_top_level_corr():
    ok = {"corr": 3, "v": [[{"a": "[[[[[[[[[[[[["}]] * 100}
    assert decode_frame(encode_frame(ok)[4:], 4) == ok           # brackets inside strings do not count
    deep = b'{"v":{"corr":99},"api":"Produce","x":' + b"[" * 65 + b"]" * 65 + b',"corr":7}'
    with pytest.raises(FrameError) as caught:
        decode_frame(deep, MAX_REQUEST_NESTING)
    assert (caught.value.corr, caught.value.api, caught.value.kind) == (7, "Produce", "frame")
    assert decode_frame(deep.replace(b"[" * 65, b"[" * 62).replace(b"]" * 65, b"]" * 62), MAX_REQUEST_NESTING)
    with pytest.raises(FrameError):                                # past the interpreter's limit
        decode_frame(b'{"corr":1,"v":' + b"[" * 100_000 + b"]" * 100_000 + b"}")


async def _echo(request):
    return {"echo": field(request, "n", int, minimum=0)}


async def _slow(request):
    await asyncio.sleep(field(request, "delay", (int, float)))
    return {"done": request["delay"]}


async def _fails(request):
    raise RequestError("NOT_LEADER_OR_FOLLOWER", "broker 2 leads")


async def _crashes(request):
    return {"x": request["no-such-field"]}


HANDLERS = {"Echo": _echo, "Slow": _slow, "Fails": _fails, "Crashes": _crashes}


async def _with_server(body, max_frame_bytes=1024):
    server = await asyncio.start_server(
        lambda r, w: serve_connection(r, w, HANDLERS, max_frame_bytes=max_frame_bytes), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with server:
            return await asyncio.wait_for(body(port), 10)
    finally:
        server.close()


async def _request(reader, writer, message):
    await write_frame(writer, message)
    return await read_frame(reader)


def test_bad_input_gets_error_and_server_keeps_serving():
    async def body(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        out = {}
        out["ok"] = await _request(reader, writer, {"api": "Echo", "corr": 1, "n": 5})
        out["unknown"] = await _request(reader, writer, {"api": "Nope", "corr": 2})
        out["typed"] = await _request(reader, writer, {"api": "Echo", "corr": 3, "n": "5"})
        out["bool"] = await _request(reader, writer, {"api": "Echo", "corr": 4, "n": True})
        out["neg"] = await _request(reader, writer, {"api": "Echo", "corr": 5, "n": -1})
        out["missing"] = await _request(reader, writer, {"api": "Echo", "corr": 6})
        out["nocorr"] = await _request(reader, writer, {"api": "Echo", "n": 1})
        out["noapi"] = await _request(reader, writer, {"corr": 7})
        out["handler-error"] = await _request(reader, writer, {"api": "Fails", "corr": 8})
        out["handler-bug"] = await _request(reader, writer, {"api": "Crashes", "corr": 9})
        writer.write(struct.pack(">I", 5) + b"[1,2]")              # aligned, not an object
        out["array"] = await read_frame(reader)
        writer.write(struct.pack(">I", 3) + b"\xff\x00{")          # aligned, not JSON
        out["garbage-body"] = await read_frame(reader)
        out["after"] = await _request(reader, writer, {"api": "Echo", "corr": 10, "n": 6})
        writer.close()
        return out

    out = asyncio.run(_with_server(body))
    assert out["ok"] == {"corr": 1, "error": None, "echo": 5}
    assert out["unknown"]["error"] == "UNSUPPORTED_API" and out["unknown"]["corr"] == 2
    for key in ["typed", "bool", "neg", "missing", "nocorr", "noapi", "handler-bug", "array", "garbage-body"]:
        assert out[key]["error"] == "INVALID_REQUEST", key
    assert "'n'" in out["typed"]["message"]
    assert out["handler-error"] == {"corr": 8, "error": "NOT_LEADER_OR_FOLLOWER", "message": "broker 2 leads"}
    assert out["after"] == {"corr": 10, "error": None, "echo": 6}


@pytest.mark.parametrize("payload", [
    struct.pack(">I", 4096) + b"x" * 10,          # oversized length prefix
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",         # garbage read as a huge length
])
def test_oversized_or_garbage_closes_connection_but_not_server(payload):
    async def body(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(payload)
        answer = await read_frame(reader)
        closed = await read_frame(reader)                         # then end of stream
        writer.close()
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)
        other = await _request(r2, w2, {"api": "Echo", "corr": 1, "n": 1})
        w2.close()
        return answer, closed, other

    answer, closed, other = asyncio.run(_with_server(body))
    assert answer["error"] == "INVALID_REQUEST" and "exceeds" in answer["message"]
    assert closed is None
    assert other["echo"] == 1


def test_responses_are_matched_by_corr_and_may_overtake():
    async def body(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await write_frame(writer, {"api": "Slow", "corr": 1, "delay": 0.3})
        await write_frame(writer, {"api": "Slow", "corr": 2, "delay": 0})
        first, second = await read_frame(reader), await read_frame(reader)
        writer.close()
        return first, second

    first, second = asyncio.run(_with_server(body))
    assert (first["corr"], second["corr"]) == (2, 1)


def test_read_frame_end_of_stream_cases():
    async def body():
        reader = asyncio.StreamReader()
        reader.feed_eof()
        clean = await read_frame(reader)
        torn = asyncio.StreamReader()
        torn.feed_data(struct.pack(">I", 10) + b"abc")
        torn.feed_eof()
        with pytest.raises(ConnectionError):
            await read_frame(torn)
        half_header = asyncio.StreamReader()
        half_header.feed_data(b"\x00\x00")
        half_header.feed_eof()
        with pytest.raises(ConnectionError):
            await read_frame(half_header)
        return clean

    assert asyncio.run(body()) is None


def _echo_protocol_server(max_frame_bytes=1 << 20):
    """A FrameProtocol server that answers each frame with {"corr", "size"} and reports bad frames."""
    def factory():
        proto = None

        def on_message(m):
            proto.send({"corr": m.get("corr"), "size": len(m.get("data", ""))})

        def on_bad(e):
            proto.send({"corr": None, "error": "INVALID_REQUEST", "message": str(e)})
        proto = FrameProtocol(on_message, on_bad_frame=on_bad, max_frame_bytes=max_frame_bytes)
        return proto
    return factory


def test_frame_protocol_split_coalesced_and_large_frames():
    async def body():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_echo_protocol_server(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            # Many frames in one write, one frame byte by byte, a frame larger than the buffer.
            writer.write(b"".join(encode_frame({"corr": i, "data": "x" * i}) for i in range(50)))
            for b in encode_frame({"corr": 50, "data": "abc"}):
                writer.write(bytes([b]))
                await writer.drain()
            writer.write(encode_frame({"corr": 51, "data": "y" * 300_000}))
            writer.write(struct.pack(">I", 2) + b"[]")                     # bad but aligned
            writer.write(encode_frame({"corr": 52}))
            answers = [await read_frame(reader) for _ in range(54)]
            writer.write(struct.pack(">I", 5 << 20))                      # oversized: closed
            last = await read_frame(reader)
            eof = await read_frame(reader)
            writer.close()
            return answers, last, eof
        finally:
            server.close()

    answers, last, eof = asyncio.run(asyncio.wait_for(body(), 20))
    assert [a["corr"] for a in answers] == list(range(52)) + [None, 52]
    assert [a["size"] for a in answers[:51]] == list(range(50)) + [3]
    assert answers[51]["size"] == 300_000
    assert answers[52]["error"] == "INVALID_REQUEST"
    assert "exceeds" in last["message"] and eof is None

"""Client error classification, retries and pooling against a scripted loopback server.

The server here is a test double of the *broker's wire behaviour* (it answers
with chosen error codes, stalls, or drops the connection), so that every
Definite/Indefinite branch of the client is exercised deterministically. The
real cluster is exercised in test_processes.py.
"""

import asyncio
import socket

import pytest

from replica.client import Client, DefiniteError, IndefiniteError
from replica.wire import RequestError, serve_connection

pytestmark = pytest.mark.unit


class Scripted:
    """A one-broker cluster on loopback whose Produce/Fetch behaviour a test sets."""

    def __init__(self):
        self.produce_behaviour = "ok"
        self.fetch_errors: list[str] = []
        self.calls: dict[str, int] = {}
        self.connections = 0
        self.log: list = []
        self.port = None

    def count(self, api):
        self.calls[api] = self.calls.get(api, 0) + 1

    async def metadata(self, req):
        self.count("Metadata")
        return {"topics": {"log": {"0": {"leader": 1, "leader_epoch": 1, "isr": [1], "replicas": [1],
                                         "version": 1}}},
                "brokers": {"1": ["127.0.0.1", self.port]}, "controller": ["127.0.0.1", self.port]}

    async def produce(self, req):
        self.count("Produce")
        b = self.produce_behaviour
        if b == "ok":
            self.log.extend(req["values"])
            return {"offset": len(self.log) - len(req["values"]), "last_offset": len(self.log) - 1}
        if b == "stall":
            await asyncio.sleep(60)
        if b == "drop":
            self.writer.transport.abort()            # connection lost after the request arrived
            await asyncio.sleep(60)
        raise RequestError(b)

    async def fetch(self, req):
        self.count("Fetch")
        if self.fetch_errors:
            raise RequestError(self.fetch_errors.pop(0))
        recs = [[i, 1, 0, v] for i, v in enumerate(self.log)][req["offset"]:]
        return {"records": recs, "hw": len(self.log), "log_start": 0, "leo": len(self.log), "leader_epoch": 1}

    async def create(self, req):
        self.count("CreateTopic")
        return {"topic": req["topic"], "partitions": {"0": {"leader": 1, "isr": [1], "replicas": [1]}}}

    async def serve(self, reader, writer):
        self.connections += 1
        self.writer = writer
        handlers = {"Metadata": self.metadata, "Produce": self.produce, "Fetch": self.fetch,
                    "CreateTopic": self.create}
        await serve_connection(reader, writer, handlers)


def run_with(body):
    async def main():
        scripted = Scripted()

        async def on_connect(r, w):
            try:
                await scripted.serve(r, w)
            except BaseException:                    # cancelled at shutdown
                w.transport.abort()
        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        scripted.port = server.sockets[0].getsockname()[1]
        client = Client([("127.0.0.1", scripted.port)], request_timeout=1.0)
        try:
            async with server:
                return await asyncio.wait_for(body(client, scripted), 20)
        finally:
            await client.close()
            server.close()
    return asyncio.run(main())


def test_produce_fetch_and_one_pooled_connection():
    async def body(client, s):
        offsets = await asyncio.gather(*(client.produce("log", 0, i) for i in range(20)))
        base = await client.produce_many("log", 0, ["a", "b"], acks=1)
        recs, hw = await client.fetch("log", 0, 18)
        created = await client.create_topic("log", 1, 1)
        return sorted(offsets), base, recs, hw, s.connections, created

    offsets, base, recs, hw, connections, created = run_with(body)
    assert offsets == list(range(20)) and base == 20
    assert hw == 22 and [v for _, v in recs] == [18, 19, "a", "b"] and recs[0][0] == 18
    assert connections == 1
    assert created[0]["leader"] == 1


@pytest.mark.parametrize("code", ["NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PARTITION"])
def test_produce_definite_errors_are_not_retried(code):
    async def body(client, s):
        s.produce_behaviour = code
        with pytest.raises(DefiniteError) as info:
            await client.produce("log", 0, 1)
        return info.value.code, s.calls["Produce"]

    assert run_with(body) == (code, 1)


@pytest.mark.parametrize("behaviour, code", [
    ("REQUEST_TIMED_OUT", "REQUEST_TIMED_OUT"),
    ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
    ("SOMETHING_NEW", "SOMETHING_NEW"),
    ("stall", "NETWORK_ERROR"),
    ("drop", "NETWORK_ERROR"),
])
def test_produce_indefinite_outcomes(behaviour, code):
    async def body(client, s):
        await client.metadata("log")
        s.produce_behaviour = behaviour
        with pytest.raises(IndefiniteError) as info:
            await client.produce("log", 0, 1)
        calls = s.calls["Produce"]
        s.produce_behaviour = "ok"
        after = await client.produce("log", 0, 2)        # the client recovers (new connection if dropped)
        return info.value.code, calls, after

    got_code, calls, after = run_with(body)
    assert (got_code, calls) == (code, 1)
    assert after == 0


def test_connection_refused_is_definite():
    async def main():
        with socket.socket() as sock:                    # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        client = Client([("127.0.0.1", port)], request_timeout=0.5)
        client.brokers[1] = ("127.0.0.1", port)
        client._partitions[("log", 0)] = {"leader": 1}
        try:
            with pytest.raises(DefiniteError) as info:
                await client.produce("log", 0, 1)
            with pytest.raises(DefiniteError):
                await client.metadata("log")
            return info.value.code
        finally:
            await client.close()

    assert asyncio.run(main()) == "NETWORK_ERROR"


def test_fetch_retries_retriable_errors_but_not_out_of_range():
    async def body(client, s):
        await client.produce("log", 0, "x")
        s.fetch_errors = ["NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH"]
        recs, hw = await client.fetch("log", 0, 0)
        fetches = s.calls["Fetch"]
        s.fetch_errors = ["OFFSET_OUT_OF_RANGE"]
        with pytest.raises(DefiniteError) as info:
            await client.fetch("log", 0, 0)
        return recs, fetches, info.value.code, s.calls["Fetch"]

    recs, fetches, code, total = run_with(body)
    assert recs == [(0, "x")] and fetches == 3
    assert code == "OFFSET_OUT_OF_RANGE" and total == 4

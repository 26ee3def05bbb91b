"""The harness keeps the freshest of the brokers' metadata answers, not the first
(systems/kafka/freshest.py, KafkaLogClient.describe; issue 42).

The TCP test serves DescribeTopicPartitions answers from two local listeners
over real sockets: the broker asked first answers at once with a stale view
(itself as leader, epoch 0), as a leader cut off from the controller does; the
other answers later with the controller's election (n2, epoch 1)."""
from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from systems.kafka.client import KafkaLogClient
from systems.kafka.freshest import freshest

pytestmark = pytest.mark.unit


def part(leader, epoch, isr=(1, 2, 3)):
    return {"leader_id": leader, "leader_epoch": epoch, "replica_nodes": [1, 2, 3], "isr_nodes": list(isr)}


def test_the_highest_leader_epoch_wins_whoever_answered_first():
    kept = freshest([("n1", {0: part(1, 0)}), ("n2", {0: part(2, 1, (2, 3))}), ("n3", {0: part(2, 1, (2, 3))})])
    assert kept[0]["leader_id"] == 2 and kept[0]["view_from"] == "n2"


def test_without_epochs_the_controller_then_the_majority_decides():
    stale, fresh = part(1, None), part(2, None, (2, 3))
    # ZooKeeper era, Metadata v1: no leader epoch. The controller broker's view is kept,
    # even against a majority that has not heard its UpdateMetadata yet ...
    assert freshest([("n1", {0: stale}), ("zk", {0: fresh})], controller="zk")[0]["view_from"] == "zk"
    assert freshest([("n1", {0: stale}), ("n2", {0: stale}), ("zk", {0: fresh})],
                    controller="zk")[0]["view_from"] == "zk"
    # ... and without it, the view most brokers share.
    kept = freshest([("n1", {0: stale}), ("n2", {0: fresh}), ("n3", {0: fresh})])
    assert kept[0]["leader_id"] == 2 and kept[0]["view_from"] == "n2"


def test_each_partition_is_taken_from_its_own_freshest_answer():
    kept = freshest([("n1", {0: part(1, 3), 1: part(1, 0)}), ("n2", {0: part(2, 2), 1: part(3, 4)})])
    assert (kept[0]["view_from"], kept[1]["view_from"]) == ("n1", "n2")
    assert kept[1]["leader_id"] == 3


def _answer(leader: int, epoch: int, isr: list[int]) -> bytes:
    from kafka.protocol.admin import DescribeTopicPartitionsResponse as R

    topic = R.DescribeTopicPartitionsResponseTopic
    p = topic.DescribeTopicPartitionsResponsePartition(
        error_code=0, partition_index=0, leader_id=leader, leader_epoch=epoch, replica_nodes=[1, 2, 3],
        isr_nodes=isr, eligible_leader_replicas=None, last_known_elr=None, offline_replicas=[])
    r = R(throttle_time_ms=0, next_cursor=None, topics=[topic(
        error_code=0, name="log", topic_id=uuid.uuid4(), is_internal=False, partitions=[p],
        topic_authorized_operations=-2147483648)])
    r.API_VERSION = 0
    return r


async def _broker(answer, delay: float):
    """A listener that answers every request with `answer` after `delay` seconds."""
    async def serve(reader, writer):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        request = await reader.readexactly(size)
        correlation = struct.unpack(">i", request[4:8])[0]
        await asyncio.sleep(delay)
        answer.with_header(correlation_id=correlation)
        writer.write(answer.encode(header=True, framed=True))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[:2]


def _metadata(*brokers, request_timeout: float = 5.0, bound: float | None = None):
    """client.metadata() against local listeners [(answer, delay, name)], asked in that
    order; -> (metadata, seconds it took)."""
    async def go():
        servers, names = [], {}
        for answer, delay, name in brokers:
            server, address = await _broker(answer, delay)
            servers.append(server)
            names[address] = name
        client = KafkaLogClient(list(names), request_timeout=request_timeout, names=names)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            return await asyncio.wait_for(client.metadata(), bound), loop.time() - t0
        finally:
            for server in servers:
                server.close()
            await client.close()

    return asyncio.run(go())


def test_a_stale_answer_that_arrives_first_is_not_kept():
    # n1, the old leader cut off, answers at once; n2 has the controller's election but is
    # slow (a loaded machine); n3 does not answer (paused). The majority rule waits for n2.
    meta, _ = _metadata((_answer(1, 0, [1, 2, 3]), 0.0, "n1"), (_answer(2, 1, [2, 3]), 0.8, "n2"),
                        (_answer(2, 1, [2, 3]), 30.0, "n3"))
    m = meta[0]
    assert (m.leader, m.epoch, m.isr, m.view) == ("n2", 1, ("n2", "n3"), "n2")
    assert m.as_json()["view_from"] == "n2"


def test_a_broker_that_never_answers_does_not_hold_the_call():
    # n1 is paused: it holds its connection for an hour, and the request timeout is a
    # minute; a call that waited for every broker would not end within the bound.
    meta, _ = _metadata((_answer(1, 0, [1, 2, 3]), 3600.0, "n1"), (_answer(2, 1, [2, 3]), 0.0, "n2"),
                        (_answer(2, 1, [2, 3]), 0.0, "n3"), request_timeout=60.0, bound=30.0)
    assert meta[0].leader == "n2" and meta[0].view == "n2"

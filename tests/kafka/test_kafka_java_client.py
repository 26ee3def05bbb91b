"""Kafka's Java client (`client=java`, systems/kafka/java_client.py) against a real
KRaft cluster (Kafka 4.1, controller on ctl, three brokers) on netns, in a real JVM:
sends, polls and end offsets of several client processes served by one JVM; what
each error proves (a send refused before the accumulator is `fail`, a send to a
paused leader is `info`, a poll past the end is OFFSET_OUT_OF_RANGE, a deleted
topic is an absence); and a JVM killed with sends in flight ends them as `info`,
its clients open again in a new JVM, and no JVM is left once the loop ends."""
import asyncio
import os
import signal
import time

import pytest

from harness.sut import AbsentError, DefiniteError, IndefiniteError
from systems.kafka.java_client import JavaKafkaClient
from tests.kafka.kafkautil import QUICK_FAILOVER, KafkaCluster, log_ready, need_root, until

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(600)]
SUBNET = "10.221.37.0/24"
SETTINGS = QUICK_FAILOVER


@pytest.fixture(scope="module")
def kafka_java(tmp_path_factory):
    need_root()
    with KafkaCluster(SUBNET, tmp=tmp_path_factory.mktemp("kafka-java"), settings=SETTINGS, client="java") as c:
        c.db.setup()
        yield c


def _alive(pid: int | None) -> bool:
    """A client JVM with that pid is running (not a reused pid, not a zombie)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return state != "Z" and b"ReplogKafkaClient" in cmd


async def _sent(client, key: int, value) -> int:
    """The offset of an acknowledged send, plus one (truthy for `until`)."""
    return await client.send(key, value) + 1


def test_one_jvm_serves_every_client_process(kafka_java):
    db = kafka_java.db

    async def scenario():
        await log_ready(db, timeout=90)
        a, b = db.client(), db.client()
        idem = JavaKafkaClient(db.client_jvms(), db.admin_client(), idempotent=True)
        assert isinstance(a, JavaKafkaClient)
        try:
            offsets = [await a.send(0, v) for v in range(10, 20)]
            other = await b.send(1, {"x": [1, 2]})
            pid = db.client_jvms().pid()
            more = [await idem.send(0, v) for v in (20, 21)]
            one = await a.send(0, 22, acks="1")
            head = await b.poll(0, 0, max_records=4)
            rest = await b.poll(0, 4)
            mixed = await b.poll(1, 0)
            end = await b.end_offset(0)
            try:
                await b.poll(0, 500)
                beyond = None
            except DefiniteError as e:
                beyond = str(e)
            again = await b.poll(0, 12, max_records=2)   # the key past its end reads again once sought back
            same = db.client_jvms().pid()
        finally:
            for c in (a, b, idem):
                await c.close()
        return offsets, other, pid, more, one, head, rest, mixed, end, beyond, again, same

    offsets, other, pid, more, one, head, rest, mixed, end, beyond, again, same = kafka_java.run(scenario)
    assert offsets == list(range(10)) and other == 0 and more == [10, 11] and one == 12
    assert pid is not None and same == pid, "every client process is served by the run's one JVM"
    assert head == [(i, 10 + i) for i in range(4)]
    assert rest == [(i, 10 + i) for i in range(4, 13)]
    assert mixed == [(0, {"x": [1, 2]})]
    assert end == 13
    assert beyond is not None and "OFFSET_OUT_OF_RANGE" in beyond   # the workload's truncated-log signal
    assert again == [(12, 22)]
    assert not _alive(pid), "the JVM ends with the event loop that started it"


def test_what_each_send_error_proves(kafka_java):
    """Refused before the accumulator (no such partition; a record over max.request.size): `fail`;
    the leader paused while the send waits: `info` (the leader may have appended it)."""
    db = kafka_java.db

    async def scenario():
        await log_ready(db, timeout=90)
        client = JavaKafkaClient(db.client_jvms(), db.admin_client(request_timeout=2.0), request_timeout=2.0)
        try:
            errors = {}
            for name, key, value in (("no partition", 7, 1), ("too large", 1, "x" * 1_100_000)):
                try:
                    await client.send(key, value)
                except Exception as e:  # noqa: BLE001 - the class is the assertion
                    errors[name] = e
            leader = (await client.metadata())[0].leader
            db.pause(leader)
            try:
                t0 = time.monotonic()
                try:
                    await client.send(0, 99)
                except Exception as e:  # noqa: BLE001
                    errors["paused leader"] = e
                waited = time.monotonic() - t0
            finally:
                db.resume(leader)
            await until(lambda: _sent(client, 1, 100), timeout=60)   # the client goes on once the leader answers
        finally:
            await client.close()
        return errors, waited

    errors, waited = kafka_java.run(scenario)
    assert type(errors["no partition"]) is DefiniteError, errors
    assert "metadata" in str(errors["no partition"])   # it waited max.block.ms for a partition 7
    assert type(errors["too large"]) is DefiniteError and "MESSAGE_TOO_LARGE" in str(errors["too large"]), errors
    assert type(errors["paused leader"]) is IndefiniteError, errors
    assert waited < 10, "the send's request and delivery timeouts follow the client's request timeout"


def test_a_killed_jvm_ends_its_ops_as_info_and_leaves_nothing(kafka_java):
    """SIGKILL of the client JVM while sends wait on a paused leader: each in-flight send is an
    IndefiniteError naming the JVM's exit; the clients open again in a new JVM; no JVM is left."""
    db = kafka_java.db

    async def scenario():
        await log_ready(db, timeout=90)
        clients = [db.client(request_timeout=10.0) for _ in range(3)]
        try:
            for i, c in enumerate(clients):
                await c.send(1, 1000 + i)   # all three open in the JVM
            first = db.client_jvms().pid()
            leader = (await clients[0].metadata())[0].leader
            db.pause(leader)
            try:
                sends = [asyncio.create_task(c.send(0, 2000 + i)) for i, c in enumerate(clients[:2])]
                await asyncio.sleep(1.0)
                assert not any(s.done() for s in sends)
                os.kill(first, signal.SIGKILL)
                outcomes = await asyncio.gather(*sends, return_exceptions=True)
            finally:
                db.resume(leader)
            after = await until(lambda: _sent(clients[2], 1, 3000), timeout=60)
            second = db.client_jvms().pid()
        finally:
            for c in clients:
                await c.close()
        return first, outcomes, after, second

    first, outcomes, after, second = kafka_java.run(scenario)
    assert all(type(o) is IndefiniteError and "client JVM exited" in str(o) for o in outcomes), outcomes
    assert isinstance(after, int) and after >= 1
    assert second is not None and second != first
    assert not _alive(first) and not _alive(second)


def test_a_deleted_topic_is_an_absence(kafka_java):
    """The last test of the module (it deletes the topic): an end offset of a key whose topic the
    brokers no longer have is an AbsentError, as with librdkafka."""
    from confluent_kafka.admin import AdminClient

    db = kafka_java.db

    async def scenario():
        await log_ready(db, timeout=90)
        client = db.client(request_timeout=3.0)
        try:
            await client.send(0, 1)
            bootstrap = ",".join(f"{h}:{p}" for h, p in db.endpoints())
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})   # kept until its answer
            await asyncio.to_thread(admin.delete_topics(["log"])["log"].result, 30)

            async def gone():
                try:
                    await client.end_offset(0)
                except AbsentError as e:
                    return e
                return None
            return await until(gone, timeout=60)
        finally:
            await client.close()

    absent = kafka_java.run(scenario)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in str(absent)

"""The Kafka adapter against a real KRaft cluster (Kafka 4.1, controller on
ctl, three brokers) on netns: offsets and reads, DescribeTopicPartitions
(leader, epoch, ISR) and each replica's own offsets in the inspector, a new
leader in a higher epoch after a kill, ISR events from the brokers' logs,
and every replica's dump, read from the stopped brokers' segments, holding
exactly the acknowledged records."""
import json
import subprocess

import pytest

from harness.sut import DefiniteError
from systems.kafka.db import KafkaMissing
from tests.kafka.kafkautil import QUICK_FAILOVER, KafkaCluster, healthy, log_ready, need_root, until

pytestmark = [pytest.mark.root, pytest.mark.slow]
SUBNET = "10.221.7.0/24"
SETTINGS = QUICK_FAILOVER


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory):
    need_root()
    with KafkaCluster(SUBNET, tmp=tmp_path_factory.mktemp("kafka"), settings=SETTINGS) as c:
        c.db.setup()
        c.acked = {}
        yield c


def test_sends_polls_metadata_and_replica_offsets(kafka3):
    db = kafka3.db

    async def scenario():
        await log_ready(db, timeout=60)
        client = db.client()
        try:
            offsets = [await client.send(0, v) for v in range(10, 20)]
            other = await client.send(1, "x")
            head = await client.poll(0, 0, max_records=4)
            rest = await client.poll(0, 4)
            end = await client.end_offset(0)
            meta = await client.metadata()
            states = {}

            async def all_replicated():
                states.update({n: await db.inspector.state(n) for n in db.nodes})
                return all(st and st[0].leo == 10 and st[0].hw == 10 for st in states.values())
            await until(all_replicated, timeout=30)   # a follower's HW (checkpointed every 5 s) catches up
            try:
                await client.poll(0, 500)
                beyond = None
            except DefiniteError as e:
                beyond = str(e)
        finally:
            await client.close()
        return offsets, other, head, rest, end, meta, states, beyond

    offsets, other, head, rest, end, meta, states, beyond = kafka3.run(scenario)
    kafka3.acked.update({(0, o): 10 + i for i, o in enumerate(offsets)} | {(1, 0): "x"})
    assert offsets == list(range(10)) and other == 0
    assert head == [(i, 10 + i) for i in range(4)] and rest == [(i, 10 + i) for i in range(4, 10)]
    assert end == 10
    leader = meta[0].leader
    assert set(meta[0].replicas) == {"n1", "n2", "n3"} and meta[0].epoch is not None
    for node, state in states.items():
        assert state[0].leo == 10 and state[0].log_start == 0
        assert state[0].role == ("leader" if node == leader else "follower")
        assert state[0].leader == leader and state[0].epoch == meta[0].epoch
    assert set(states[leader][0].isr) == {"n1", "n2", "n3"}
    assert beyond is not None and "OFFSET_OUT_OF_RANGE" in beyond   # the workload's truncated-log signal


def test_a_killed_leader_is_replaced_in_a_higher_epoch(kafka3):
    db = kafka3.db

    async def scenario():
        await log_ready(db, timeout=60)
        client = db.client()
        try:
            before = (await client.metadata())[0]
            db.kill(before.leader)
            after = await until(lambda: _new_leader(client, before.leader), timeout=30)
            offset = await client.send(0, 99)
            paused = await db.inspector.state(before.leader)
            db.start(before.leader)
            await until(lambda: healthy(client, 2), timeout=60)
        finally:
            await client.close()
        return before, after, offset, paused

    before, after, offset, paused = kafka3.run(scenario)
    kafka3.acked[(0, offset)] = 99
    assert after.leader != before.leader and after.epoch > before.epoch
    assert offset == 10
    assert paused is None   # a dead broker does not answer the inspector


async def _new_leader(client, old):
    m = (await client.metadata())[0]
    return m if m.leader not in (None, old) and old not in m.isr else None


def test_a_paused_broker_does_not_answer_the_inspector(kafka3):
    db = kafka3.db
    node = db.nodes[-1]
    db.pause(node)
    try:
        state = kafka3.run(lambda: db.inspector.state(node, timeout=1.0))
    finally:
        db.resume(node)
    assert state is None


def test_dumps_of_stopped_brokers_hold_every_acknowledged_record(kafka3, tmp_path):
    """Last: it stops the cluster. Every replica holds exactly the acknowledged
    records at their offsets; the kill shows in the logs as ISR events."""
    db = kafka3.db
    assert kafka3.acked, "runs after the tests that write"
    db.teardown()
    events = {}
    for node in db.hosts:
        db.collect(node, tmp_path / node)
        if node in db.nodes:
            events[node] = db.inspector.events(tmp_path / node, node)
    for node in db.nodes:
        dump = json.loads((tmp_path / node / "dump.json").read_text())
        got = {(p["partition"], r[0]): r[3] for p in dump["partitions"] for r in p["records"]}
        assert got == kafka3.acked, node
        assert dump["partitions"] and all(p["hw"] == p["leo"] for p in dump["partitions"])   # a clean stop checkpoints the HW
    kinds = {e["event"] for evs in events.values() for e in evs}
    assert {"isr-shrink", "isr-expand"} <= kinds


def test_no_java_on_a_host_is_one_line_naming_the_fix(tmp_path):
    need_root()
    with KafkaCluster("10.221.8.0/24", nodes=1, tmp=tmp_path, java="/nonexistent/bin/java") as c:
        with pytest.raises(KafkaMissing) as e:
            c.db.setup()
    text = str(e.value)
    assert "\n" not in text and "has no Java" in text and "openjdk-17-jre-headless" in text
    out = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True)
    assert out.returncode == 1   # nothing left running


def test_a_deleted_topic_is_a_definite_absence(tmp_path):
    """The broker's UNKNOWN_TOPIC_OR_PARTITION after a topic is gone is
    AbsentError (the final phase then counts the key's acknowledged sends as
    lost), not a timeout: metadata, end offsets and reads all say so."""
    need_root()
    from confluent_kafka.admin import AdminClient

    from harness.sut import AbsentError

    with KafkaCluster("10.221.12.0/24", nodes=1, keys=1, tmp=tmp_path, settings={"min.insync.replicas": 1}) as c:
        c.db.setup()

        async def scenario():
            client = c.db.client()
            try:
                await until(lambda: _create1(client), timeout=60)
                await until(lambda: healthy(client, 1, 1), timeout=60)
                offset = await client.send(0, 7)
                bootstrap = ",".join(f"{h}:{p}" for h, p in c.db.endpoints())
                admin = AdminClient({"bootstrap.servers": bootstrap})   # kept: the future needs its handle
                admin.delete_topics(["log"])["log"].result(30)
                answers = {}

                async def absent(name, call):
                    try:
                        await call()
                    except AbsentError as e:
                        answers[name] = str(e)
                        return True
                    return False
                await until(lambda: absent("metadata", client.metadata), timeout=30)
                await until(lambda: absent("end_offset", lambda: client.end_offset(0)), timeout=30)
                return offset, answers
            finally:
                await client.close()

        offset, answers = c.run(scenario)
    assert offset == 0 and set(answers) == {"metadata", "end_offset"}
    assert all("UNKNOWN_TOPIC" in a for a in answers.values()), answers


async def _create1(client):
    await client.create(1, 1, {})
    return True

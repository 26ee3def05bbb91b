"""Real processes: a controller and three brokers on loopback survive a leader crash without losing acks.

Acceptance: 10,000 acks=all records are read back in order; a SIGKILLed
partition leader is replaced within the session timeout plus one second;
writes continue; the restarted broker rejoins the ISR; every acknowledged
record is in every replica's Dump; the checkpoint files on disk follow Kafka's
format and agree with the brokers' State.
"""

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from cluster_fixture import read_partition
from replica.client import ClientError, DefiniteError
from replica.storage import (
    LEADER_EPOCH_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
    read_leader_epoch_checkpoint, read_offset_checkpoint, value_crc,
)

pytestmark = pytest.mark.root

TOPIC = "log"
PARTITIONS = 3
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


async def produce_all(client, values, acked, workers=24, tolerate_errors=False):
    """Produce each value once (acks=all) to partition value % 3; record (partition, offset, value) acks."""
    queue = list(values)
    failed = []

    async def worker():
        while queue:
            value = queue.pop()
            partition = value % PARTITIONS
            try:
                offset = await client.produce(TOPIC, partition, value, acks="all")
            except ClientError as e:
                if not tolerate_errors:
                    raise
                failed.append((value, e))
                if isinstance(e, DefiniteError):
                    await asyncio.sleep(0.05)
                continue
            acked.append((partition, offset, value))

    await asyncio.gather(*(worker() for _ in range(workers)))
    return failed


async def controller_meta(cluster, client):
    response = await client.call(cluster.controller_address, "Metadata", topic=TOPIC)
    assert response["error"] is None, response
    return {int(p): s for p, s in response["topics"][TOPIC].items()}


async def wait_until(predicate, timeout, what, poll=0.05):
    deadline = time.monotonic() + timeout
    while True:
        result = await predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(poll)


CHECKPOINT_RE = re.compile(rb"0\n(\d+)\n((?:[^ \n]+(?: [^ \n]+)*\n)*)\Z")


def assert_kafka_checkpoint_format(path, fields):
    raw = open(path, "rb").read()
    match = CHECKPOINT_RE.fullmatch(raw)
    assert match, f"{path} is not in Kafka checkpoint format: {raw[:200]!r}"
    lines = match.group(2).decode().splitlines()
    assert int(match.group(1)) == len(lines), path
    for line in lines:
        assert len(line.split(" ")) == fields, (path, line)
        assert all(re.fullmatch(r"-?\d+", f) for f in line.split(" ")[-2:]), (path, line)


@pytest.mark.timeout(240)
def test_cluster_survives_leader_crash_without_losing_acks(local_cluster):
    cluster = local_cluster(brokers=3, era="epoch", settings={"min.insync.replicas": 2})
    session_timeout = cluster.settings["broker.session.timeout.ms"] / 1000

    async def scenario():
        client = cluster.client()
        try:
            await cluster.wait_registered(client)
            await client.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
            await client.wait_for_leaders(TOPIC, timeout=20)

            # 1. 10,000 acks=all records, read back in order.
            acked = []
            await produce_all(client, range(10_000), acked)
            assert len(acked) == 10_000
            for p in range(PARTITIONS):
                mine = sorted((o, v) for q, o, v in acked if q == p)
                assert [o for o, _ in mine] == list(range(len(mine))), "acked offsets are dense"
                assert await read_partition(client, p, len(mine)) == mine

            # 2. SIGKILL the leader of partition 0; a new leader within session timeout + 1 s.
            before = await controller_meta(cluster, client)
            victim = before[0]["leader"]
            cluster.signal(victim, signal.SIGKILL)
            killed_at = time.monotonic()

            async def new_leader():
                meta = await controller_meta(cluster, client)
                leader = meta[0]["leader"]
                return meta if leader not in (None, victim) else None
            after = await wait_until(new_leader, session_timeout + 5, "a new leader of partition 0")
            elapsed = time.monotonic() - killed_at
            print(f"partition 0: leader {victim} killed, {after[0]['leader']} elected after {elapsed:.2f}s")
            assert elapsed <= session_timeout + 1.0, f"new leader after {elapsed:.2f}s"
            assert after[0]["leader_epoch"] > before[0]["leader_epoch"]
            assert victim not in after[0]["isr"]

            # 3. Keep writing while the broker is down (min.insync.replicas=2 still holds).
            failed = await produce_all(client, range(10_000, 11_500), acked, workers=8, tolerate_errors=True)
            assert len(acked) > 10_000 + 1_000, f"too few writes succeeded after the crash: {failed[:5]}"

            # 4. Restart the killed broker; it rejoins every ISR (a dead replica had left them all).
            down = await controller_meta(cluster, client)
            assert down and all(victim not in s["isr"] for s in down.values()), down
            cluster.start_broker(victim)

            async def rejoined():
                meta = await controller_meta(cluster, client)
                return all(victim in s["isr"] for s in meta.values())
            restarted_at = time.monotonic()
            await wait_until(rejoined, 60, f"broker {victim} to rejoin the ISR of every partition", poll=0.2)
            print(f"broker {victim} back in every ISR {time.monotonic() - restarted_at:.2f}s after restart; "
                  f"{len(failed)} produces failed while it was down")
            await produce_all(client, range(11_500, 11_600), acked, workers=4)

            # 5. Every acknowledged record is in every replica's Dump, at its offset, with its CRC.
            async def caught_up():
                states = [await client.state(b) for b in cluster.broker_ids]
                ends = {(p["partition"], p["leo"], p["hw"]) for s in states for p in s["partitions"]}
                return len(ends) == PARTITIONS and all(leo == hw for _, leo, hw in ends) and states
            await wait_until(caught_up, 30, "all replicas at the same LEO and HW")
            dumps = {b: await client.dump(b) for b in cluster.broker_ids}
            for broker, dump in dumps.items():
                logs = {p["partition"]: {r[0]: r for r in p["records"]} for p in dump["partitions"]
                        if p["topic"] == TOPIC}
                assert set(logs) == set(range(PARTITIONS)), broker
                for partition, offset, value in acked:
                    record = logs[partition].get(offset)
                    assert record is not None, f"broker {broker} lost {TOPIC}-{partition}@{offset}"
                    assert record[3] == value and record[2] == value_crc(value), (broker, record)

            # Give the periodic HW checkpoint time to catch up with the final HW.
            await asyncio.sleep(2 * cluster.settings["replica.high.watermark.checkpoint.interval.ms"] / 1000)
            return [await client.state(b) for b in cluster.broker_ids], acked
        finally:
            await client.close()

    states, acked = asyncio.run(scenario())

    # 6. Checkpoint files written by the brokers follow Kafka's format and agree with State.
    for state in states:
        data_dir = cluster.data_dir(state["broker"])
        hw_path = os.path.join(data_dir, REPLICATION_OFFSET_CHECKPOINT)
        rp_path = os.path.join(data_dir, RECOVERY_POINT_OFFSET_CHECKPOINT)
        assert_kafka_checkpoint_format(hw_path, 3)
        hws = read_offset_checkpoint(hw_path)
        assert set(hws) == {(TOPIC, p) for p in range(PARTITIONS)}
        assert_kafka_checkpoint_format(rp_path, 3)
        recovery_points = read_offset_checkpoint(rp_path)
        assert set(recovery_points) == set(hws)
        for part in state["partitions"]:
            last_acked = max(o for p, o, _ in acked if p == part["partition"])
            assert hws[(TOPIC, part["partition"])] == part["hw"] > last_acked, (state["broker"], part)
            assert 0 <= recovery_points[(TOPIC, part["partition"])] <= part["leo"]
            epoch_path = os.path.join(data_dir, f"{TOPIC}-{part['partition']}", LEADER_EPOCH_CHECKPOINT)
            assert_kafka_checkpoint_format(epoch_path, 2)
            assert [list(e) for e in read_leader_epoch_checkpoint(epoch_path)] == part["epoch_cache"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("era", ["hw", "kip101"])
def test_older_eras_fail_over_and_rejoin(local_cluster, era):
    """The same crash/restart cycle, smaller, on the two older protocol generations (no loss expected
    here: acks=all with min.insync.replicas=2 and a clean election)."""
    cluster = local_cluster(brokers=3, era=era, settings={"min.insync.replicas": 2})

    async def scenario():
        client = cluster.client()
        try:
            await cluster.wait_registered(client)
            await client.create_topic(TOPIC, partitions=1, replication_factor=3)
            await client.wait_for_leaders(TOPIC, timeout=20)
            acked = []
            await produce_all(client, [3 * i for i in range(300)], acked, workers=8)
            victim = (await controller_meta(cluster, client))[0]["leader"]
            cluster.signal(victim, signal.SIGKILL)

            async def new_leader():
                leader = (await controller_meta(cluster, client))[0]["leader"]
                return leader not in (None, victim)
            await wait_until(new_leader, 15, "a new leader")
            await produce_all(client, [3 * i for i in range(300, 400)], acked, workers=4, tolerate_errors=True)
            cluster.start_broker(victim)

            async def rejoined():
                return victim in (await controller_meta(cluster, client))[0]["isr"]
            await wait_until(rejoined, 60, f"broker {victim} to rejoin the ISR", poll=0.2)
            records = await read_partition(client, 0, max(o for _, o, _ in acked) + 1)
            dumps = [await client.dump(b) for b in cluster.broker_ids]
            return acked, records, dumps
        finally:
            await client.close()

    acked, records, dumps = asyncio.run(scenario())
    assert len(acked) >= 350
    read = dict(records)
    assert [o for o, _ in records] == list(range(len(records))), "reads are dense and ordered"
    for _, offset, value in acked:
        assert read.get(offset) == value
    for dump in dumps:
        log = {r[0]: r[3] for r in dump["partitions"][0]["records"]}
        missing = [(o, v) for _, o, v in acked if log.get(o) != v]
        assert not missing, f"broker {dump['broker']} misses acked records {missing[:5]}"


def test_client_command_line(local_cluster):
    cluster = local_cluster(brokers=1)
    bootstrap = f"{cluster.controller_address[0]}:{cluster.controller_address[1]}"

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "replica.client", "--bootstrap", bootstrap, *args],
                              capture_output=True, text=True, timeout=60, cwd=str(REPO))

    async def registered():
        client = cluster.client()
        try:
            await cluster.wait_registered(client)
        finally:
            await client.close()
    asyncio.run(registered())
    assert cli("create", "cli", "--partitions", "1", "--replication-factor", "1").returncode == 0
    for _ in range(100):
        produced = cli("produce", "cli", "0", '{"k": 1}')
        if produced.returncode == 0:
            break
        time.sleep(0.1)
    assert produced.stdout.strip() == "0", produced.stderr
    fetched = cli("fetch", "cli", "0")
    assert json.loads(fetched.stdout) == [[[0, {"k": 1}]], 1]
    bad = cli("produce", "nope", "0", "1")
    assert bad.returncode == 1 and "DefiniteError" in bad.stderr

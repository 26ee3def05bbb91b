"""Kafka 4.x tiered storage (KIP-405, systems/kafka/tiered.py) on a real KRaft
cluster on netns: LocalTieredStorage in the run's shared remote directory, the
topic-based remote log metadata. Acknowledged records are copied to remote
storage and deleted locally on every broker; a consumer reading from offset 0
then gets every one of them (read from remote storage); the inspector shows
each replica's local log start, the remote end and the leader's log start; the
remote tier's dump holds the records no broker holds locally any more."""
import asyncio
import os
import time

import pytest

from harness.sut import ClientError
from systems.kafka import segments, tiered
from tests.kafka.kafkautil import KafkaCluster, log_ready, need_root, until

pytestmark = [pytest.mark.root, pytest.mark.slow]
SUBNET = "10.221.27.0/24"
SETTINGS = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 1000,
            "replica.lag.time.max.ms": 5000}
COUNT = 30


def test_a_reader_from_offset_0_gets_every_acknowledged_record_from_remote_storage(tmp_path):
    need_root()
    with KafkaCluster(SUBNET, keys=1, tmp=tmp_path, settings=SETTINGS, tiered=True) as c:
        c.db.setup()
        db = c.db
        assert db.tiered

        async def scenario():
            await log_ready(db, keys=1, timeout=90)
            client = db.client()
            try:
                acked = {}
                for v in range(COUNT):
                    acked[await client.send(0, 1000 + v)] = 1000 + v
                states = {}

                async def tiered_everywhere():
                    states.update({n: (await db.inspector.state(n))[0] for n in db.nodes})
                    return all(s.local_log_start is not None and s.local_log_start >= COUNT - 6 and
                               s.remote_end is not None and s.remote_end >= COUNT - 6 for s in states.values())
                await until(tiered_everywhere, timeout=90, period=0.5)
                got = []
                deadline = time.monotonic() + 30  # a poll waits 100 ms for a fetch (Jepsen's), and
                while len(got) < COUNT:           # a fetch from remote storage may take longer: empty
                    batch = await client.poll(0, len(got))  # polls are legal, no records in 30 s is not
                    if not batch:
                        assert time.monotonic() < deadline, f"no records from offset {len(got)} in 30 s"
                        await asyncio.sleep(0.1)
                    got += batch
                more = await db.inspector.more_dumps()
                faults = await remote_store_faults(db, client)
            finally:
                await client.close()
            return acked, states, got, more, faults

        acked, states, got, more, faults = c.run(scenario)
        local_starts = {n: s.local_log_start for n, s in states.items()}
        first_local = {n: segments.segment_files(db.partition_dir(n, 0))[0][0] for n in db.nodes}
        remote_segs = tiered.remote_segments(db.remote_dir(), "log", 0)
        files = all(os.path.isfile(p) for _b, p in remote_segs)

    assert sorted(acked) == list(range(COUNT))
    assert got == sorted(acked.items())                       # every acknowledged record, from offset 0
    assert all(start > 0 for start in first_local.values())   # ... which no broker holds locally any more
    assert all(s.log_start == 0 for s in states.values())     # the leader's log start counts the remote tier
    assert all(s.remote_end >= local_starts[n] for n, s in states.items())
    assert len(remote_segs) >= (COUNT - 6) // 3 and files
    remote = more["remote"]["partitions"][0]
    assert [r[0] for r in remote["records"]] == list(range(remote["leo"]))
    assert remote["leo"] >= min(local_starts.values())
    assert [r[3] for r in remote["records"]] == [acked[o] for o in range(remote["leo"])]
    # The remote-store fault's modes on LocalTieredStorage (systems/kafka/tiered.py, KafkaRemoteTier).
    assert "error" in faults["unavailable"] and faults["back"][:3] == got[:3]
    assert faults["quota"] == {q: "256" for q in tiered.QUOTAS}
    lost = faults["lost"]
    assert (lost["key"], lost["base"], lost["end"]) == (0, 0, 2) and any(o.endswith(".log") for o in lost["objects"])
    assert "error" in faults["after_loss"] and faults["after_loss_at_3"][0][0] == 3


async def remote_store_faults(db, client) -> dict:
    """Unavailable: a read from offset 0 (below every local log start) fails; back: it
    reads again. Slow: the brokers' remote quotas are set (what a reader then sees
    depends on the quota's window: not asserted). Lose the first segment: the
    read from 0 fails, the read from 3 does not."""
    import asyncio

    async def read(offset):
        try:
            return await client.poll(0, offset, 3)
        except ClientError as e:
            return {"error": str(e)}

    tier, out = db.remote_tier, {}
    tier.set_available(False)
    try:
        out["unavailable"] = await read(0)
    finally:
        tier.set_available(True)
    out["back"] = await read(0)
    await asyncio.to_thread(tier.set_delay, 1.0)
    try:
        out["quota"] = await asyncio.to_thread(described_quotas, db)
    finally:
        await asyncio.to_thread(tier.set_delay, 0)
    out["lost"] = tier.lose(tier.segments()[0])
    out["after_loss"] = await read(0)
    out["after_loss_at_3"] = await read(3)
    return out


def described_quotas(db) -> dict:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": ",".join(f"{h}:{p}" for h, p in db.endpoints()), "log_level": 0})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(timeout=15)
    return {q: entries[q].value for q in tiered.QUOTAS if q in entries}

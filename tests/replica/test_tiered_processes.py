"""Tiered storage with real processes: the object store (``replica.remote_store``,
HTTP), a controller and three brokers on loopback.

Segments of a few records, local retention 0 bytes, RLM and retention every
200 ms: the leader tiers and deletes locally, a consumer reads the whole log
from offset 0 through the remote store, a follower that was down rejoins
through OFFSET_MOVED_TO_TIERED_STORAGE and BuildingRemoteLogAux, the objects on
the store's disk follow the segment / offset index / leader-epoch-checkpoint
formats, and a corrupt remote segment is an error, never different data.
"""

import asyncio
import os
import signal
import time
from urllib.parse import quote

from replica import storage as S
from replica.client import ClientError
from replica.remote_store import StoreClient
import pytest

pytestmark = pytest.mark.root

TOPIC = "log"
TIERED = {"remote.storage.enable": True, "log.segment.bytes": 100, "local.retention.bytes": 0,
          "remote.log.manager.task.interval.ms": 200, "log.retention.check.interval.ms": 200,
          "min.insync.replicas": 1}


async def read_all(client, end):
    got, offset = [], 0
    while offset < end:
        batch, _hw = await client.fetch(TOPIC, 0, offset, max_records=1000)
        got.extend(batch)
        offset = got[-1][0] + 1 if got else offset
    return got


async def state_of(client, b):
    return (await client.state(b))["partitions"][0]


async def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.1)


def test_tiering_follower_rejoin_and_remote_reads(local_cluster):
    cluster = local_cluster(brokers=3, settings=TIERED, remote_store=True)

    async def main():
        client = cluster.client()
        try:
            await cluster.wait_registered(client)
            await client.create_topic(TOPIC, partitions=1, replication_factor=3)
            await client.wait_for_leaders(TOPIC, timeout=20)
            leader = (await client.metadata(TOPIC))[0]["leader"]
            follower = next(b for b in cluster.broker_ids if b != leader)
            for v in range(30):
                await client.produce(TOPIC, 0, v, acks="all")
            cluster.signal(follower, signal.SIGKILL)
            for v in range(30, 80):
                await client.produce(TOPIC, 0, v, acks="all")

            async def tiered():
                s = await state_of(client, leader)
                return s["local_log_start"] > 40 and s["remote_end"] >= s["local_log_start"]
            await wait_for(tiered)
            s = await state_of(client, leader)
            assert s["log_start"] == 0 and s["hw"] == 80
            got = await read_all(client, 80)
            assert [v for _, v in got] == list(range(80))          # 0..40 from the remote store
            cluster.start_broker(follower)

            async def rejoined():
                f = await state_of(client, follower)
                return f["leo"] == 80 and f["fetch_state"] == "fetching" and follower in f["isr"]
            await wait_for(rejoined, 30)
            f = await state_of(client, follower)
            l = await state_of(client, leader)
            assert f["local_log_start"] > 30 and f["epoch_cache"] == l["epoch_cache"]
            assert "BuildingRemoteLogAux" in cluster.log_path(f"n{follower}").read_text() or \
                "rebuilt epochs" in cluster.log_path(f"n{follower}").read_text()

            # The objects on the store's disk: segment, Kafka offset index, epoch checkpoint.
            # The leader may still be copying a segment (its .log is uploaded before its index and
            # checkpoint): the listing is taken once every segment's three objects are there.
            store = StoreClient(cluster.store_address)

            deadline = time.monotonic() + 30
            while True:
                keys = store.list_keys(f"{TOPIC}-0/")
                logs = sorted(k for k in keys if k.endswith(".log"))
                if logs and all(k[:-4] + ".index" in keys and k[:-4] + ".leader-epoch-checkpoint" in keys
                                for k in logs):
                    break
                assert time.monotonic() < deadline, f"segments without their index or checkpoint: {sorted(keys)}"
                await asyncio.sleep(0.1)
            records = S.decode_records(store.get(logs[0]), 0)
            assert [r.value for r in records] == list(range(len(records)))
            assert S.decode_offset_index(store.get(logs[0][:-4] + ".index"), 0)[0] == (0, 0)
            assert S.parse_leader_epoch_checkpoint(store.get(logs[0][:-4] + ".leader-epoch-checkpoint"))

            # A corrupt remote segment is an error for a consumer, never other data.
            path = os.path.join(cluster.data_dir("store"), quote(logs[0], safe=""))
            data = bytearray(open(path, "rb").read())
            data[-1] ^= 0xFF
            open(path, "wb").write(bytes(data))
            cluster.signal(leader, signal.SIGKILL)          # the next leader has no cached segments

            async def moved():
                try:
                    m = (await client.metadata(TOPIC))[0]
                except ClientError:
                    return False
                return m["leader"] not in (None, leader)
            await wait_for(moved, 30)
            reader = cluster.client()
            try:
                try:
                    await reader.fetch(TOPIC, 0, 0, max_records=1000)
                    raise AssertionError("a corrupt remote segment was read")
                except ClientError as e:
                    assert "KAFKA_STORAGE_ERROR" in str(e) or getattr(e, "code", "") == "KAFKA_STORAGE_ERROR", e
                batch, _ = await reader.fetch(TOPIC, 0, len(records), max_records=1000)
                assert batch[0] == (len(records), len(records))   # the next segment is intact
            finally:
                await reader.close()
        finally:
            await client.close()

    asyncio.run(main())

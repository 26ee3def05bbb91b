"""The dumps after a run with power faults see what the servers wrote.

nats-server's data directory sits on the power fault's FUSE layer
(nemesis/lazyfs), which keeps unsynced writes apart from the backing folder
the dumps read. A clean stop at the end of a run is no power failure: the
fault's release hook writes out what each layer still holds before it
unmounts, so every acknowledged publish is in every node's dump. Without that
step the dumps were empty (nothing was fsynced yet) and the replica diff
called every acknowledged write "absent from every replica".
Real nats-server (Debian's), nats-py, lazyfs on netns.
"""
from __future__ import annotations

import json
import types

import nats
import pytest

from harness.sut import HostPlan
from nemesis import power
from tests.nats.natsutil import NatsCluster, need_root, until

pytestmark = [pytest.mark.root, pytest.mark.slow]

N = 50


def test_a_clean_stop_over_the_power_layer_leaves_every_record_in_the_dumps(tmp_path):
    need_root()
    power.preflight("netns", __import__("systems.nats", fromlist=["SYSTEM"]).SYSTEM.capabilities_in())
    with NatsCluster("10.212.4.0/24", keys=1, tmp=tmp_path) as c:
        env = types.SimpleNamespace(db=c.db, cluster=c.cluster, plan=HostPlan(list(c.db.nodes)),
                                    log=lambda m: None)
        power.prepare(env)   # lazyfs under every data directory, before the servers start
        released = False
        try:
            c.db.setup()

            async def publish():
                client = c.db.client(5.0)
                try:
                    await until(lambda: _create(client), timeout=60)
                    return [await client.send(0, v) for v in range(1, N + 1)]
                finally:
                    await client.close()

            offsets = c.run(publish)
            assert offsets == list(range(N))
            pending = {n: power._MOUNTS[c.db].stats(n)["pending_bytes"] for n in c.db.nodes}
            assert all(pending.values()), f"nothing unsynced in the layer: the test would prove nothing ({pending})"
            c.db.teardown()          # the clean stop at the end of a run
            power.release(env)       # writes out what each layer holds, then unmounts
            released = True
            for node in c.db.nodes:
                dest = tmp_path / "nodes" / node
                c.db.collect(node, dest)
                dump = json.loads((dest / "dump.json").read_text())
                (part,) = [p for p in dump["partitions"] if p["partition"] == 0]
                assert [r[0] for r in part["records"]] == list(range(N)), node
                assert [r[3] for r in part["records"]] == list(range(1, N + 1)), node
        finally:
            if not released:
                power.release(env)


async def _create(client):
    await client.create(1, 3)
    meta = await client.metadata()
    return meta.get(0) is not None and meta[0].leader is not None and len(meta[0].isr) == 3

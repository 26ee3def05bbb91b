"""JetStream's meta group as scenario roles (`the metadata leader`,
`metadata follower I`): the inspector takes the leader from the nodes' own
/jsz reports (a node that names itself, named by a majority), and on a real
cluster that is the node that leads, and another one once it is killed."""
from __future__ import annotations

import asyncio

import pytest

from systems.nats.inspector import meta_leader
from tests.nats.natsutil import NatsCluster, need_root, until

NODES = ["n1", "n2", "n3"]


def _jsz(leader):
    return {"meta_cluster": {"name": "replog", "leader": leader, "cluster_size": 3}} if leader is not None else {}


@pytest.mark.unit
def test_the_leader_is_a_node_that_names_itself_and_a_majority_names():
    assert meta_leader({"n1": _jsz("n2"), "n2": _jsz("n2"), "n3": _jsz("n2")}, NODES) == "n2"
    assert meta_leader({"n1": _jsz("n2"), "n2": _jsz("n2"), "n3": None}, NODES) == "n2"   # n3 paused
    # a paused or cut-off node still naming itself, the others electing anew: no leader yet
    assert meta_leader({"n1": _jsz("n1"), "n2": _jsz(None), "n3": _jsz(None)}, NODES) is None
    assert meta_leader({"n1": _jsz("n2"), "n2": None, "n3": _jsz("n2")}, NODES) is None   # n2 does not answer
    assert meta_leader({"n1": _jsz(None), "n2": None, "n3": None}, NODES) is None


@pytest.mark.root
@pytest.mark.slow
def test_a_real_cluster_names_its_metadata_leader_and_a_new_one_after_a_kill(tmp_path):
    need_root()
    with NatsCluster("10.212.8.0/24", keys=1, tmp=tmp_path) as c:
        c.db.setup()
        inspector = c.db.inspector

        async def leader_now(but=None):
            group = await inspector.meta_group(NODES)
            leader = (group or {}).get("leader")
            return leader if leader not in (None, but) else None

        first = c.run(lambda: until(leader_now, timeout=30))
        group = c.run(lambda: inspector.meta_group(NODES))
        assert group == {"leader": first, "members": NODES}
        async def reports_now():
            return await asyncio.gather(*(inspector.jsz_path(n, "/jsz") for n in NODES))

        reports = c.run(reports_now)
        assert {r["meta_cluster"]["leader"] for r in reports} == {first}
        c.db.process.kill(first)
        second = c.run(lambda: until(lambda: leader_now(but=first), timeout=30))
        assert second in NODES and second != first

"""JetStream's meta group as scenario roles (`the metadata leader`,
`metadata follower I`): the inspector takes the leader from the nodes' own
/jsz reports (a node that names itself, named by a majority), and on a real
cluster that is the node that leads, and another one once it is killed."""
from __future__ import annotations

import asyncio

import pytest

from systems.nats.inspector import meta_leader, meta_views
from tests.nats.natsutil import NatsCluster, need_root, until
from workloads.log import meta_views_line

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


@pytest.mark.unit
def test_each_nodes_view_of_the_leader_is_what_a_set_up_timeout_reports():
    """A stream that cannot be placed because a server stays outside the meta group (seen on
    2.10.23 under load: n1 never named a leader in 60 s) is reported with each node's view."""
    views = meta_views({"n1": _jsz(None), "n2": _jsz("n2"), "n3": None})
    assert views == {"n1": "", "n2": "n2", "n3": None}
    assert meta_views_line(views) == "; metadata leader as each node names it: n1 none, n2 n2, n3 no answer"
    assert meta_views_line({}) == ""


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
        assert group == {"leader": first, "members": NODES, "views": {n: first for n in NODES}}
        async def reports_now():
            return await asyncio.gather(*(inspector.jsz_path(n, "/jsz") for n in NODES))

        reports = c.run(reports_now)
        assert {r["meta_cluster"]["leader"] for r in reports} == {first}
        c.db.process.kill(first)
        second = c.run(lambda: until(lambda: leader_now(but=first), timeout=30))
        assert second in NODES and second != first
        views = c.run(lambda: inspector.meta_group(NODES))["views"]
        assert views[first] is None and {views[n] for n in NODES if n != first} == {second}, views


@pytest.mark.root
@pytest.mark.slow
def test_a_set_up_whose_stream_cannot_be_placed_names_the_server_outside_the_meta_group(tmp_path):
    """n3 paused as the cluster starts never joins JetStream's meta group, so an R3 stream has
    too few peers ("no suitable peers for placement"): the set-up's timeout says which node
    names which leader, and that n3 does not answer."""
    need_root()
    from workloads.log import LogWorkload, WorkloadConfig

    with NatsCluster("10.212.12.0/24", keys=1, tmp=tmp_path) as c:
        c.db.install()
        for node in NODES:
            c.db.start(node)
        c.db.pausable.pause("n3")
        workload = LogWorkload(WorkloadConfig(keys=1, replication_factor=3, request_timeout=2.0), c.db, None)

        async def set_up():
            with pytest.raises(TimeoutError) as failed:
                await workload.setup(timeout=6.0)
            return str(failed.value)

        message = c.run(set_up)
        c.db.pausable.resume("n3")
    assert message.startswith("could not create the log: "), message
    views = message.split("; metadata leader as each node names it: ", 1)[1]
    assert views.endswith("n3 no answer") and views.startswith("n1 "), message

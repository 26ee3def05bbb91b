"""Partition topologies: the grudge each kind produces has the shape its name
promises, for every cluster size and seed."""
from __future__ import annotations

import random

import networkx as nx
from hypothesis import given, settings, strategies as st

from nemesis import grudges
import pytest

pytestmark = pytest.mark.unit

sizes = st.integers(min_value=3, max_value=6)
seeds = st.integers(min_value=0, max_value=2**32)


def hosts(n):
    return ["ctl"] + [f"n{i}" for i in range(1, n)]


def undirected_components(g):
    return sorted(sorted(c) for c in nx.weakly_connected_components(g))


@given(sizes, seeds, st.sampled_from(grudges.KINDS))
@settings(max_examples=200, deadline=None)
def test_grudges_are_irreflexive_and_nontrivial(n, seed, kind):
    nodes = hosts(n)
    g = grudges.make(kind, nodes, random.Random(seed), leader="n1", controller="ctl")
    grudge = grudges.grudge_of(g)
    assert set(grudge) == set(nodes)
    assert all(node not in dropped for node, dropped in grudge.items())
    assert any(grudge.values()), f"{kind} cut nothing"


@given(sizes, seeds)
def test_halves_are_two_cliques(n, seed):
    g = grudges.halves(hosts(n), random.Random(seed))
    comps = undirected_components(g)
    assert len(comps) == 2 and abs(len(comps[0]) - len(comps[1])) <= 1


@given(st.integers(min_value=5, max_value=9), seeds)
def test_majorities_ring_sees_distinct_majorities(n, seed):
    nodes = [f"n{i}" for i in range(n)]
    g = grudges.majorities_ring(nodes, random.Random(seed))
    views = [frozenset({v} | set(g.predecessors(v))) for v in nodes]
    assert all(len(v) > n // 2 for v in views)
    assert len(set(views)) == n


@given(sizes, seeds)
def test_bridge_has_one_node_seeing_both_sides(n, seed):
    g = grudges.bridge(hosts(n), random.Random(seed))
    full = [v for v in g.nodes if g.in_degree(v) == n - 1]
    assert len(full) == 1
    rest = g.subgraph([v for v in g.nodes if v not in full])
    assert nx.number_weakly_connected_components(rest) == 2


def test_leader_and_controller_isolation():
    nodes = hosts(4)
    rng = random.Random(0)
    assert grudges.describe(grudges.make("leader", nodes, rng, leader="n2", controller="ctl"))["n2"] == ["ctl", "n1", "n3"]
    ctl = grudges.describe(grudges.make("controller", nodes, rng, controller="ctl"))
    assert ctl["ctl"] == ["n1", "n2", "n3"] and ctl["n1"] == ["ctl"]


def test_one_way_is_asymmetric():
    g = grudges.one_way(hosts(4), "n1")
    d = grudges.describe(g)
    assert d == {"n1": ["ctl", "n2", "n3"]}


def test_a_scripted_cut_can_refuse_instead_of_drop():
    """`partition: {cut: [X, Y], reject: true}`: the grudge graph carries the choice to the
    network (nemesis/network.py: TCP resets, resets let through), and drops stay the default."""
    from types import SimpleNamespace

    from nemesis.partition import parse_start

    plan = SimpleNamespace(hosts=["ctl", "n1", "n2", "n3"])
    refused = parse_start({"cut": ["n1", "n2"], "reject": True}).resolve(lambda n: n, plan)
    dropped = parse_start({"cut": ["n1", "n2"]}).resolve(lambda n: n, plan)
    assert refused.detail.graph["reject"] is True and dropped.detail.graph["reject"] is False
    assert grudges.grudge_of(refused.detail) == grudges.grudge_of(dropped.detail)
    assert not refused.detail.has_edge("n1", "n2") and refused.detail.has_edge("n1", "n3")


def test_a_cut_to_a_host_the_run_lacks_is_refused_not_dropped():
    """A ZooKeeper-era Kafka run has zk, not ctl: cutting n1 from ctl used to leave the graph
    whole (an empty grudge, the scenario went on as if cut)."""
    from types import SimpleNamespace

    from nemesis.fault import FaultArgError
    from nemesis.partition import parse_start

    plan = SimpleNamespace(hosts=["n1", "n2", "n3", "zk"])
    with pytest.raises(FaultArgError, match=r"ctl is not a host of this run \(n1, n2, n3, zk\)"):
        parse_start({"cut": ["n1", "ctl"]}).resolve(lambda n: n, plan)
    assert not parse_start({"cut": ["n1", "zk"]}).resolve(lambda n: n, plan).detail.has_edge("n1", "zk")

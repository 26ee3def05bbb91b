"""Issue 26: the targeted mode of the random schedule (nemesis/targeted.py).

Unit tests feed `find` real snapshots (harness.sut.KeyMeta / ReplicaState, as
an inspector returns them) and check which node each moment picks; the root
test runs the replica under `--nemesis-mode targeted` and reads the `why` of
every fault in the history."""
from __future__ import annotations

import itertools
import json
import random
import subprocess

import pytest

from harness.sut import KeyMeta, ReplicaState
from nemesis import targeted
from nemesis.targeted import MOMENTS, PLAYS, Snapshot, find, moves


def snap(meta: dict, states: dict, t: int = 0) -> Snapshot:
    return Snapshot(t, {k: KeyMeta(*m) for k, m in meta.items()},
                    {n: {s.key: s for s in ss} for n, ss in states.items()})


META = {0: ("n1", 3, ("n1", "n2", "n3"), ("n1", "n2", "n3"))}


def healthy(hw2=10, leo2=12, isr=("n1", "n2", "n3")):
    return snap({0: ("n1", 3, ("n1", "n2", "n3"), isr)}, {
        "n1": [ReplicaState(0, "leader", "n1", 3, 12, 10, 0, isr)],
        "n2": [ReplicaState(0, "follower", "n1", 3, leo2, hw2, 0)],
        "n3": [ReplicaState(0, "follower", "n1", 3, 12, 10, 0)]})


@pytest.mark.unit
def test_moves_are_fixed_by_the_seed():
    a = list(itertools.islice(moves(7, ["kill", "pause"], 10.0), 100))
    b = list(itertools.islice(moves(7, ["kill", "pause"], 10.0), 100))
    c = list(itertools.islice(moves(8, ["kill", "pause"], 10.0), 100))
    assert a == b
    assert a != c
    assert {m.moment for m in a} <= set(MOMENTS)
    assert {m.play for m in a} == {p for _, p, _ in PLAYS}  # 100 moves draw every play
    assert all(1.0 <= m.brief_s <= 3.0 for m in a)
    # a play's second move follows its first without a gap
    assert all(m.gap_s == 0 for m in a if m.play == "follower-then-leader" and m.step == 1)


@pytest.mark.unit
def test_the_fast_failover_play_needs_kill_and_unclean_election():
    """Only runs that can show KIP-279 draw it; every other run draws what it drew before."""
    unclean = {"unclean.leader.election.enable": True}
    assert targeted.plays_for(["kill", "partition"], {}) == PLAYS
    assert targeted.plays_for(["pause", "partition"], unclean) == PLAYS
    with_it = targeted.plays_for(["kill", "partition"], unclean)
    assert with_it == PLAYS + (targeted.FAST_FAILOVER,)
    drawn = list(itertools.islice(moves(7, ["kill", "partition"], 10.0, with_it), 100))
    assert "fast-failover" in {m.play for m in drawn}
    assert list(itertools.islice(moves(7, ["kill"], 10.0, PLAYS), 50)) == \
        list(itertools.islice(moves(7, ["kill"], 10.0), 50))


@pytest.mark.unit
def test_the_late_commit_play_needs_a_transactional_workload_and_pause():
    """A transaction's partition leader paused past the request timeout (issue 37): always a
    pause, whatever else the faults are; drawn only where it means something."""
    faults = ["pause", "kill", "partition"]
    assert targeted.plays_for(faults, {}) == PLAYS
    assert targeted.plays_for(["kill", "partition"], {}, transactional=True) == PLAYS
    with_it = targeted.plays_for(faults, {}, transactional=True)
    assert with_it == PLAYS + (targeted.LATE_COMMIT,)
    drawn = list(itertools.islice(moves(3, faults, 10.0, with_it), 200))
    late = [m for m in drawn if m.play == "late-commit"]
    assert len(late) > len(drawn) / 3 and all(m.fault == "pause" and m.hold == "late" for m in late)
    assert {m.fault for m in drawn if m.play != "late-commit"} == set(faults)
    both = targeted.plays_for(faults, {}, transactional=True, coordinator=True)
    assert both == PLAYS + (targeted.LATE_COMMIT, targeted.LATE_COMMIT_COORDINATOR)
    drawn = list(itertools.islice(moves(3, faults, 10.0, both), 200))
    aimed = [m for m in drawn if m.play == "late-commit-coordinator"]
    assert aimed and all(m.fault == "pause" and m.moment == "coordinator-in-flight" for m in aimed)


@pytest.mark.unit
def test_a_hold_for_one_leader_ignores_every_other():
    """The fast-failover play's holds: a killed replica the metadata still names, or a third one
    elected meanwhile, is not the reaction the play waits for."""
    before = ("n1", ("n1", "n2", "n3"))
    only_n2 = targeted.Hold(None, 0, 30, 1e18, leader_is="n2")
    not_n1 = targeted.Hold(None, 0, 30, 1e18, leader_is_not="n1")
    shrunk = snap({0: ("n1", 4, ("n1", "n2", "n3"), ("n1",))}, {})
    n3_leads = snap({0: ("n3", 5, ("n1", "n2", "n3"), ("n3",))}, {})
    n2_leads = snap({0: ("n2", 6, ("n1", "n2", "n3"), ("n2",))}, {})
    no_leader = snap({0: (None, 6, ("n1", "n2", "n3"), ("n2",))}, {})
    assert [only_n2._reacted(before, s) for s in (shrunk, n3_leads, no_leader, n2_leads)] == \
        [False, False, False, True]
    assert [not_n1._reacted(before, s) for s in (shrunk, n3_leads, no_leader)] == [False, True, False]
    assert targeted.Hold(None, 0, 30, 1e18)._reacted(before, shrunk)   # plain: any change with a leader
    back = targeted.Hold(None, 0, 30, 1e18, isr_includes=("n1", "n3"))
    rejoined = snap({0: ("n2", 6, ("n1", "n2", "n3"), ("n2", "n3", "n1"))}, {})
    assert [back._reacted(before, s) for s in (n2_leads, no_leader, rejoined)] == [False, False, True]


@pytest.mark.unit
def test_leader_moment():
    node, why = find("leader", healthy(), healthy(), random.Random(1), {})
    assert node == "n1" and why["key"] == 0 and why["isr"] == ["n1", "n2", "n3"]


@pytest.mark.unit
def test_follower_moved_picks_the_follower_whose_hw_moved():
    assert find("follower-moved", healthy(), healthy(), random.Random(1), {}) is None
    node, why = find("follower-moved", healthy(), healthy(hw2=11, leo2=13), random.Random(1), {})
    assert node == "n2" and why["hw"] == [10, 11] and why["leo"] == [12, 13]


@pytest.mark.unit
def test_leader_in_flight_needs_a_send_in_flight():
    assert find("leader-in-flight", healthy(), healthy(), random.Random(1), {0: 0}) is None
    node, why = find("leader-in-flight", healthy(), healthy(), random.Random(1), {0: 2})
    assert node == "n1" and why["in_flight"] == 2


@pytest.mark.unit
def test_isr_change_picks_who_left_or_joined():
    shrunk = healthy(isr=("n1", "n3"))
    node, why = find("isr-change", healthy(), shrunk, random.Random(1), {})
    assert node == "n2" and why["left"] == "n2"
    node, why = find("isr-change", shrunk, healthy(), random.Random(1), {})
    assert node == "n2" and why["joined"] == "n2"
    assert find("isr-change", healthy(), healthy(), random.Random(1), {}) is None


@pytest.mark.unit
def test_last_standing():
    assert find("last-standing", healthy(), healthy(), random.Random(1), {}) is None
    node, why = find("last-standing", healthy(), healthy(isr=("n3",)), random.Random(1), {})
    assert node == "n3" and why["isr"] == ["n3"]


@pytest.mark.unit
def test_back_leaves_the_node_last_standing():
    nodes = ["n1", "n2", "n3"]
    victims, why = targeted.isr_but_back(healthy(), nodes, random.Random(1), "n2")
    assert victims == ["n1", "n3"] and why == {"moment": "back", "key": 0, "back": "n2", "leader": "n1",
                                               "isr": ["n1", "n2", "n3"], "epoch": 3}
    victims, why = targeted.isr_but_back(healthy(isr=("n1", "n3")), nodes, random.Random(1), "n2")
    assert victims == ["n1"] and why["fallback"] == "leader"  # out of the ISR: it cannot be left standing
    victims, why = targeted.isr_but_back(healthy(), nodes, random.Random(1), "n1")  # the leader came back
    assert why["fallback"] == "leader"


@pytest.mark.unit
def test_first_times_per_anomaly(tmp_path):
    from harness import verdict

    ops = [{"index": i, "time": t, "process": 0, "type": "ok", "f": "send", "value": [0, [i, i]]}
           for i, t in enumerate([1_000_000_000, 2_500_000_000, 4_000_000_000])]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    results = {"valid": False, "checkers": {
        "log": {"valid": False, "counts": {"lost": 1}, "examples": {"lost": [{"key": 0, "ops": [2, 1]}]}},
        "replica-diff": {"valid": False, "counts": {"divergence": 1}, "examples": {"divergence": [{"op": 2}]}}}}
    out = verdict.first_times(tmp_path, results)
    assert out["checkers"]["log"]["first_s"] == {"lost": 2.5}
    assert out["checkers"]["replica-diff"]["first_s"] == {"divergence": 4.0}
    assert out["first_anomaly_s"] == 2.5
    clean = verdict.first_times(tmp_path, {"valid": True, "checkers": {"log": {"valid": True, "counts": {}}}})
    assert clean["first_anomaly_s"] is None

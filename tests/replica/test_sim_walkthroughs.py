"""The seed walkthroughs (KIP-101, KIP-279) replayed step by step in the simulator.

Each test drives the real cores through the deterministic simulator, holding a
follower's fetches to get exact fetch rounds, and asserts LEO, HW and epoch
cache at every step. Leader epochs start at 0 when the topic is created and
grow on every leader change, including a change to "no leader".
"""

import pytest

from replica import protocol as P
from replica.sim import Simulator

pytestmark = pytest.mark.unit

ERAS = ["hw", "kip101", "epoch"]
CKPT = "replication-offset-checkpoint"


def lost(sim, leader):
    """Acknowledged records missing (or different) in the leader's log."""
    log = {o: v for o, _, v in sim.log(leader)}
    return [(o, v) for _, _, o, v in sim.acked if log.get(o) != v]


@pytest.mark.parametrize("era", ERAS)
def test_hw_leo_table_over_three_fetch_rounds(era):
    sim = Simulator(era, brokers=2, seed=1)
    leader, follower = 1, 2
    sim.hold(follower, leader, P.FETCH)
    sim.create_topic("log", 1, 2)
    assert sim.leader("log", 0) == leader
    first = sim.produce("log", 0, "m0", acks="all")
    sim.run_for(5)
    rows = []
    sim.fetch_round(follower, leader)
    rows.append((sim.leo(leader), sim.remote_leo(leader, follower), sim.hw(leader), sim.hw(follower)))
    assert first.status == "pending"          # HW 0: m0 not committed yet
    sim.produce("log", 0, "m1", acks=1)
    sim.run_for(5)
    sim.fetch_round(follower, leader)
    rows.append((sim.leo(leader), sim.remote_leo(leader, follower), sim.hw(leader), sim.hw(follower)))
    sim.run_for(5)
    assert first.status == "ok" and first.offset == 0
    sim.fetch_round(follower, leader)
    rows.append((sim.leo(leader), sim.remote_leo(leader, follower), sim.hw(leader), sim.hw(follower)))
    # (leader LEO, remote LEO, leader HW, follower HW) after each round
    assert rows == [(1, 0, 0, 0), (2, 1, 1, 1), (2, 2, 2, 2)]
    assert sim.leo(follower) == 2


def _two_replicas_follower_behind_on_hw(era):
    """Leader B=1 and follower A=2; A holds all 5 committed records but learned HW 3
    only; both HWs are checkpointed. Returns the simulator."""
    sim = Simulator(era, brokers=2, seed=1)
    B, A = 1, 2
    sim.hold(A, B, P.FETCH)
    sim.create_topic("log", 1, 2)
    first = sim.produce("log", 0, [0, 1, 2], acks="all")
    sim.fetch_round(A, B)
    sim.fetch_round(A, B)
    assert first.status == "ok" and (sim.leo(A), sim.hw(A), sim.hw(B)) == (3, 3, 3)
    second = sim.produce("log", 0, [3, 4], acks="all")
    sim.fetch_round(A, B)
    assert (sim.leo(B), sim.leo(A), sim.hw(B), sim.hw(A)) == (5, 5, 3, 3)
    # A's next fetch (offset 5) reaches B, which commits 3 and 4; the answer is held.
    sim.hold(B, A, P.FETCH, kind="response")
    sim.run_until(lambda: sim.held(A, B))
    sim.release(A, B)
    sim.run_until(lambda: second.status != "pending", 100)
    assert second.status == "ok"
    assert (sim.leo(B), sim.hw(B), sim.leo(A), sim.hw(A)) == (5, 5, 5, 3)
    sim.run_for(5000)                     # both HW checkpoints are written
    assert sim.nodes[A].disk.checkpoints[CKPT][("log", 0)] == 3
    assert sim.nodes[B].disk.checkpoints[CKPT][("log", 0)] == 5
    return sim


@pytest.mark.parametrize("era,lost_count", [("hw", 2), ("kip101", 0), ("epoch", 0)])
def test_seed_1_4_1_follower_restart_then_leader_crash(era, lost_count):
    sim = _two_replicas_follower_behind_on_hw(era)
    B, A = 1, 2
    sim.crash(A)
    sim.restart(A)
    assert sim.run_until(lambda: sim.replica(A) is not None and sim.replica(A).role == "follower"
                         and sim.replica(A).fetch_state == "fetching", 5000)
    sim.run_for(10)
    assert sim.hw(A) == 3
    assert sim.leo(A) == (3 if era == "hw" else 5)   # era hw truncates to the checkpointed HW
    if era == "epoch":
        # Kafka 2.6 treats the quick restart as a bounce: A left the ISR and
        # rejoins after one fetch (its LEO 5 reaches the HW).
        assert sim.isr("log", 0) == [B]
        sim.unhold(B, A)
        sim.fetch_round(A, B)
        assert sim.run_until(lambda: sim.isr("log", 0) == [B, A], 1000)
    else:
        assert sim.isr("log", 0) == [B, A]             # the seed: A stays in the ISR
    sim.crash(B)
    assert sim.run_until(lambda: sim.leader("log", 0) == A, 20000)
    sim.run_until(lambda: sim.replica(A).role == "leader", 100)
    epoch = sim.leader_epoch("log", 0)
    assert epoch == 1 and sim.isr("log", 0) == [A]
    expected_cache = {"hw": [], "kip101": [(0, 0)], "epoch": [(0, 0), (1, 5)]}[era]
    assert sim.epochs(A) == expected_cache
    sim.restart(B)
    assert sim.run_until(lambda: sim.replica(B) is not None and sim.replica(B).role == "follower"
                         and sim.leo(B) == sim.leo(A) and sim.replica(B).fetch_state == "fetching", 5000)
    sim.run_for(1000)
    assert sim.log(A) == sim.log(B)
    assert len(lost(sim, A)) == lost_count
    if era == "hw":
        assert lost(sim, A) == [(3, 3), (4, 4)] and sim.leo(B) == 3
    else:
        # a follower learns epochs from records; epoch 1 has none yet
        assert sim.leo(B) == 5 and sim.epochs(B) == [(0, 0)]


@pytest.mark.parametrize("era", ERAS)
def test_seed_1_4_2_both_crash_lagging_replica_returns_first(era):
    sim = Simulator(era, brokers=2, seed=1)
    B, A = 1, 2
    sim.hold(A, B, P.FETCH)
    sim.create_topic("log", 1, 2)
    sim.produce("log", 0, "m0", acks="all")
    sim.fetch_round(A, B)
    sim.fetch_round(A, B)
    assert (sim.leo(A), sim.hw(A), sim.hw(B)) == (1, 1, 1)
    sim.sync_disk(A)                      # m0 durable on A; later data only in A's page cache
    m1 = sim.produce("log", 0, "m1", acks="all")
    sim.fetch_round(A, B)
    sim.hold(B, A, P.FETCH, kind="response")
    sim.run_until(lambda: sim.held(A, B))
    sim.release(A, B)
    sim.run_until(lambda: m1.status != "pending", 100)
    assert m1.status == "ok"
    assert (sim.leo(B), sim.hw(B), sim.leo(A), sim.hw(A)) == (2, 2, 2, 1)
    sim.run_for(5000)
    # Power failure on A (unflushed m1 lost), process crash on B (page cache kept).
    sim.crash(B)
    sim.crash(A, lose_unflushed=True)
    assert sim.run_until(lambda: not sim.controller().live_brokers(), 20000)
    assert sim.leader("log", 0) is None and sim.isr("log", 0) == [A]
    sim.restart(A)
    assert sim.run_until(lambda: sim.replica(A) is not None and sim.replica(A).role == "leader", 5000)
    assert (sim.leo(A), sim.hw(A)) == (1, 1)
    epoch = sim.leader_epoch("log", 0)
    assert epoch == 2
    sim.produce("log", 0, "new", acks=1)
    sim.run_for(10)
    assert sim.log(A) == [(0, 0, "m0"), (1, epoch, "new")]
    expected = {"hw": [], "kip101": [(0, 0), (2, 1)], "epoch": [(0, 0), (2, 1)]}[era]
    assert sim.epochs(A) == expected
    sim.restart(B)
    assert sim.run_until(lambda: sim.replica(B) is not None and sim.replica(B).role == "follower"
                         and sim.replica(B).fetch_state == "fetching" and sim.leo(B) == 2, 5000)
    sim.run_for(1000)
    assert sim.hw(A) == 2 and sim.hw(B) == 2
    if era == "hw":
        assert sim.log(B)[1][2] == "m1" and sim.log(A)[1][2] == "new"   # the replicas differ at offset 1
    else:
        assert sim.log(B) == sim.log(A) and sim.epochs(B) == expected


def test_seed_1_4_3_leader_epoch_walkthrough():
    sim = Simulator("epoch", brokers=3, seed=1)
    A, B, C = 1, 2, 3
    sim.hold(B, A, P.FETCH)
    sim.hold(C, A, P.FETCH)
    sim.create_topic("log", 1, 3)
    sim.produce("log", 0, [0, 1, 2], acks=1)
    for follower in (B, C, B, C):
        sim.fetch_round(follower, A)
    sim.produce("log", 0, [3], acks=1)
    sim.fetch_round(B, A)
    sim.produce("log", 0, [4], acks=1)
    sim.run_for(5)
    assert (sim.leo(A), sim.leo(B), sim.leo(C), sim.hw(A)) == (5, 4, 3, 3)
    for r in (A, B, C):
        assert sim.epochs(r) == [(0, 0)]
    sim.crash(A)
    sim.crash(B)
    assert sim.run_until(lambda: sim.leader("log", 0) == C, 20000)
    sim.run_until(lambda: sim.replica(C).role == "leader", 100)
    assert sim.leader_epoch("log", 0) == 1 and sim.isr("log", 0) == [C]
    assert sim.epochs(C) == [(0, 0), (1, 3)]
    sim.produce("log", 0, [5, 6], acks="all")
    sim.run_for(10)
    assert sim.log(C)[3:] == [(3, 1, 5), (4, 1, 6)] and sim.leo(C) == 5

    for returning, before in ((B, 4), (A, 5)):
        sim.hold(returning, C, P.FETCH)
        sim.restart(returning)
        assert sim.run_until(lambda: sim.replica(returning) is not None
                             and sim.replica(returning).role == "follower", 5000)
        assert sim.leo(returning) == before and sim.epochs(returning) == [(0, 0)]
        assert sim.run_until(lambda: sim.replica(returning).fetch_state == "fetching", 5000)
        assert sim.leo(returning) == 3 and sim.epochs(returning) == [(0, 0)]
        sim.unhold(returning, C)
        assert sim.run_until(lambda: sim.leo(returning) == 5, 5000)
        assert sim.epochs(returning) == [(0, 0), (1, 3)]
    sim.run_for(1000)
    assert sim.log(A) == sim.log(B) == sim.log(C)
    assert [v for _, _, v in sim.log(A)] == [0, 1, 2, 5, 6]
    assert sim.hw(A) == sim.hw(B) == sim.hw(C) == 5


@pytest.mark.parametrize("era", ["kip101", "epoch"])
def test_kafka_6361_fast_failover_with_unclean_election(era):
    sim = Simulator(era, brokers=2, seed=1, config={"unclean.leader.election.enable": True})
    A, B = 1, 2
    sim.hold(B, A, P.FETCH)
    sim.create_topic("log", 1, 2)
    sim.produce("log", 0, "x0", acks=1)
    sim.fetch_round(B, A)
    sim.produce("log", 0, "x1", acks=1)
    sim.run_for(5)
    assert (sim.leo(A), sim.leo(B)) == (2, 1)
    sim.crash(A)
    sim.unhold(B, A)
    assert sim.run_until(lambda: sim.leader("log", 0) == B, 20000)
    sim.run_until(lambda: sim.replica(B).role == "leader", 100)
    assert sim.leader_epoch("log", 0) == 1
    sim.produce("log", 0, "y1", acks=1)
    sim.run_for(10)
    assert sim.log(B) == [(0, 0, "x0"), (1, 1, "y1")] and sim.epochs(B) == [(0, 0), (1, 1)]
    sim.crash(B)
    assert sim.run_until(lambda: not sim.controller().live_brokers(), 20000)
    sim.restart(A)
    assert sim.run_until(lambda: sim.replica(A) is not None and sim.replica(A).role == "leader", 5000)
    assert sim.leader_epoch("log", 0) == 3 and sim.isr("log", 0) == [A]   # epoch 2 was "no leader"
    sim.produce("log", 0, "z2", acks=1)
    sim.run_for(10)
    assert sim.log(A) == [(0, 0, "x0"), (1, 0, "x1"), (2, 3, "z2")]
    assert sim.epochs(A) == [(0, 0), (3, 2)]
    sim.restart(B)
    assert sim.run_until(lambda: sim.replica(B) is not None and sim.replica(B).role == "follower"
                         and sim.replica(B).fetch_state == "fetching" and sim.leo(B) == 3, 5000)
    sim.run_for(1000)
    if era == "kip101":
        assert sim.log(B)[1] == (1, 1, "y1") and sim.log(A)[1] == (1, 0, "x1")   # offset 1 differs
        assert sim.hw(B) == 3 and sim.hw(A) == 3
    else:
        assert sim.log(B) == sim.log(A) and sim.epochs(B) == [(0, 0), (3, 2)]

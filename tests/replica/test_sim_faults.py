"""Faults beyond the seed walkthroughs: an isolated (zombie) leader, a lossy
network, a controller restart and a bounced broker."""

import pytest

from replica import protocol as P
from replica.sim import CTL, Simulator

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("era", ["hw", "kip101", "epoch"])
def test_isolated_leader_cannot_acknowledge_acks_all(era):
    sim = Simulator(era, brokers=3, seed=7, config={"min.insync.replicas": 2})
    sim.create_topic("log", 1, 3)
    first = sim.produce("log", 0, "before", acks="all")
    sim.run_for(20)
    assert first.status == "ok"
    sim.isolate(1)                                  # the leader loses everybody but keeps running
    sim.net.link("client", 1).cut = False           # ... except the client
    sim.net.link(1, "client").cut = False
    assert sim.run_until(lambda: sim.leader("log", 0) == 2, 20000)
    zombie = sim.produce("log", 0, "zombie", acks="all", to=1, timeout_ms=3000)
    fresh = sim.produce("log", 0, "fresh", acks="all")
    sim.run_for(3100)
    assert zombie.status != "ok"
    assert fresh.status == "ok"
    sim.heal()
    assert sim.run_until(lambda: sim.replica(1).role == "follower" and sim.leo(1) == sim.leo(2), 30000)
    sim.run_for(2000)
    assert sim.values(1) == sim.values(2) == sim.values(3) == ["before", "fresh"]


def test_lossy_network_converges_without_losing_acknowledged_writes():
    sim = Simulator("epoch", brokers=3, seed=8, config={"min.insync.replicas": 2,
                                                        "replica.socket.timeout.ms": 2000})
    sim.create_topic("log", 1, 3)
    for a in (1, 2, 3, CTL):
        for b in (1, 2, 3, CTL):
            if a != b:
                sim.set_drop(a, b, 0.3)
    ops = []
    for v in range(40):
        ops.append(sim.produce("log", 0, v, acks="all", timeout_ms=2000))
        sim.run_for(250)
    sim.heal()
    sim.run_for(30000)
    leader = sim.leader("log", 0)
    logs = [sim.values(b) for b in (1, 2, 3)]
    assert logs[0] == logs[1] == logs[2]
    acked = [v for _, _, _, v in sim.acked]
    assert acked and all(v in logs[0] for v in acked)
    assert {sim.hw(b) for b in (1, 2, 3)} == {sim.leo(leader)}


def test_controller_restart_keeps_the_metadata_and_the_sessions():
    sim = Simulator("epoch", brokers=3, seed=9)
    sim.create_topic("log", 2, 3)
    before = {p: sim.controller().partition_state("log", p)["leader_epoch"] for p in (0, 1)}
    sim.crash(CTL)
    sim.run_for(5000)
    sim.restart(CTL)
    sim.run_for(3000)
    assert sorted(sim.controller().live_brokers()) == [1, 2, 3]
    assert {p: sim.controller().partition_state("log", p)["leader_epoch"] for p in (0, 1)} == before
    op = sim.produce("log", 0, "after", acks="all")
    sim.run_for(50)
    assert op.status == "ok"
    sim.crash(1)                                     # failures are still handled
    assert sim.run_until(lambda: sim.leader("log", 0) == 2, 20000)


@pytest.mark.parametrize("era,moves", [("hw", False), ("kip101", False), ("epoch", True)])
def test_a_bounced_leader_keeps_or_loses_leadership_by_era(era, moves):
    sim = Simulator(era, brokers=3, seed=10)
    sim.create_topic("log", 1, 3)
    sim.produce("log", 0, "a", acks="all")
    sim.run_for(50)
    epoch = sim.leader_epoch("log", 0)
    sim.crash(1)
    sim.restart(1)
    sim.run_for(100)
    if moves:
        assert sim.leader("log", 0) == 2 and sim.leader_epoch("log", 0) == epoch + 1
        assert sim.run_until(lambda: 1 in sim.isr("log", 0), 5000)
    else:
        assert sim.leader("log", 0) == 1 and sim.leader_epoch("log", 0) == epoch
    op = sim.produce("log", 0, "b", acks="all")
    sim.run_until(lambda: op.status != "pending", 5000)   # followers retry after replica.fetch.backoff.ms
    assert op.status == "ok"
    sim.run_for(1000)
    assert sim.values(1) == sim.values(2) == sim.values(3) == ["a", "b"]

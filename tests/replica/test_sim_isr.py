"""ISR shrink and expand, ISR change propagation and min.insync.replicas in the simulator."""

import pytest

from replica import protocol as P
from replica.sim import Simulator

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("era", ["hw", "kip101", "epoch"])
def test_lagging_follower_leaves_isr_within_one_and_a_half_lag_and_rejoins(era):
    lag = 10000
    sim = Simulator(era, brokers=3, seed=3, config={"replica.lag.time.max.ms": lag})
    sim.create_topic("log", 1, 3)
    sim.produce("log", 0, ["a"], acks="all")
    sim.run_for(100)
    sim.partition(1, 3)                        # follower 3 can no longer reach leader 1
    cut_at = sim.now
    value = 0

    def keep_writing():
        nonlocal value
        value += 1
        sim.produce("log", 0, value, acks=1)
        return 3 not in sim.replica(1).isr

    while not keep_writing():
        sim.run_for(500)
        assert sim.now - cut_at <= 1.5 * lag, "follower 3 still in the ISR after 1.5 x lag"
    assert sim.now - cut_at > lag
    assert sim.isr("log", 0) == [1, 2]
    # Broker 2 learns the new ISR only through ISR change propagation (5 s blackout, 2.5 s checks).
    shrunk_at = sim.now
    assert 3 in sim.nodes[2].core.metadata[("log", 0)]["isr"]
    assert sim.run_until(lambda: 3 not in sim.nodes[2].core.metadata[("log", 0)]["isr"], 10000)
    assert 5000 <= sim.now - shrunk_at <= 7600
    sim.heal()
    assert sim.run_until(lambda: 3 in sim.replica(1).isr, 5000)
    assert sim.leo(3) >= sim.hw(1) - 0 and sim.isr("log", 0) == [1, 2, 3]
    sim.run_for(1000)
    assert sim.log(3) == sim.log(1)


def test_min_insync_replicas():
    sim = Simulator("epoch", brokers=3, seed=4, config={"replica.lag.time.max.ms": 2000})
    sim.create_topic("log", 1, 3, config={"min.insync.replicas": 2})
    ok = sim.produce("log", 0, "a", acks="all")
    sim.run_for(50)
    assert ok.status == "ok"
    sim.partition(1, 2)
    sim.partition(1, 3)
    waiting = sim.produce("log", 0, "b", acks="all", timeout_ms=1000)
    sim.run_for(1100)
    assert waiting.status == "info" and waiting.error == P.REQUEST_TIMED_OUT
    assert sim.run_until(lambda: sim.replica(1).isr == [1], 5000)
    refused = sim.produce("log", 0, "c", acks="all")
    sim.run_for(10)
    assert refused.status == "fail" and refused.error == P.NOT_ENOUGH_REPLICAS
    assert [v for v in sim.values(1)] == ["a", "b"]


def test_power_failure_loses_unflushed_data_but_flush_messages_keeps_it():
    for flush, expected in ((None, 0), (1, 3)):
        config = {"flush.messages": flush} if flush else {}
        sim = Simulator("epoch", brokers=1, seed=5, config=config)
        sim.create_topic("log", 1, 1)
        sim.produce("log", 0, [1, 2, 3], acks="all")
        sim.run_for(50)
        sim.crash(1, lose_unflushed=True)
        sim.restart(1)
        sim.run_until(lambda: sim.replica(1) is not None and sim.replica(1).role == "leader", 20000)
        assert sim.leo(1) == expected

"""Tiered storage in the simulator beyond the seed's scenarios: a missing or
corrupt remote object is an error the follower retries (never silent data), a
consumer read of a corrupt segment fails, a copy interrupted by the store's
crash is abandoned and done again, a copy under way when leadership moves
finishes (a duplicate copy is harmless), and whole-log retention deletes
remote segments and moves the log start."""

from replica import protocol as P
from replica.core.tiered import BUILDING_AUX, object_keys
from replica.sim import Simulator
from replica.sim.disk import SimDisk
from replica.sim.simulator import CTL, STORE
import pytest

pytestmark = pytest.mark.unit

A, B = 1, 2
FAST = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500, "replica.lag.time.max.ms": 2000,
        "replica.fetch.backoff.ms": 200, "min.insync.replicas": 1, "remote.storage.enable": True,
        "log.segment.bytes": 75, "local.retention.bytes": 0, "remote.log.manager.task.interval.ms": 200,
        "log.retention.check.interval.ms": 200}


def tiered_leader(**extra) -> Simulator:
    """A leads alone (B down, out of the ISR) and has tiered 0..8 of m00..m11."""
    sim = Simulator("epoch", brokers=2, seed=1, config=dict(FAST, **extra), keep_logs=True)
    sim.create_topic("log", 1, 2)
    sim.crash(B)
    sim.nodes[B].disk = SimDisk()
    sim.run_for(6000)
    for n in range(12):
        op = sim.produce("log", 0, [f"m{n:02d}"], acks="all")
        assert sim.run_until(lambda: op.status == "ok", 5000), op
    assert sim.run_until(lambda: sim.replica(A).local_start == 9, 5000)
    return sim


def finished(sim):
    return [(s["base"], s["end"]) for s in sim.remote_segments() if s["state"] == P.COPY_SEGMENT_FINISHED]


def segment(sim, base):
    return next(s for s in sim.remote_segments() if s["base"] == base and s["state"] == P.COPY_SEGMENT_FINISHED)


def consumer_read(sim, broker, offset):
    return sim.request(broker, {"api": P.FETCH, "topic": "log", "partition": 0, "offset": offset,
                                "replica_id": -1, "max_records": 100})


def test_corrupt_then_missing_epoch_checkpoint_is_retried_until_readable():
    sim = tiered_leader()
    assert finished(sim) == [(0, 2), (3, 5), (6, 8)]
    key = object_keys("log", 0, segment(sim, 6))["epochs"]
    good = sim.objects[key]
    sim.objects[key] = b"0\n2\n0 0\n"                      # count says 2, one entry: not Kafka's format
    sim.restart(B)
    assert sim.run_until(lambda: sim.replica(B) is not None and sim.replica(B).fetch_state == BUILDING_AUX, 5000)
    sim.run_for(3000)
    p = sim.replica(B)
    assert (p.fetch_state, p.local_start, p.leo, p.epoch_cache.entries) == (BUILDING_AUX, 9, 9, [])
    assert any("unusable" in text for _, text in sim.logs)
    del sim.objects[key]                                   # missing: NOT_FOUND, retried as well
    sim.run_for(1000)
    assert sim.replica(B).fetch_state == BUILDING_AUX
    sim.objects[key] = good
    assert sim.run_until(lambda: sim.replica(B).leo == 12, 3000)
    assert sim.epochs(B) == sim.epochs(A) == [(0, 0)]


def test_consumer_reads_remote_segments_and_a_corrupt_one_is_an_error():
    sim = tiered_leader()
    answer = consumer_read(sim, A, 0)
    assert answer["error"] is None and [r[3] for r in answer["records"]] == ["m00", "m01", "m02"]
    key = object_keys("log", 0, segment(sim, 3))["log"]
    data = bytearray(sim.objects[key])
    data[-2] ^= 0x01                                       # one bit of the last value
    sim.objects[key] = bytes(data)
    answer = consumer_read(sim, A, 4)
    assert answer["error"] == P.KAFKA_STORAGE_ERROR and answer["records"] == []
    answer = consumer_read(sim, A, 6)
    assert [r[3] for r in answer["records"]] == ["m06", "m07", "m08"]


def copy_held_at_the_store() -> Simulator:
    """Four acknowledged records on leader A, whose first segment copy is
    held on its way to the store (the copy is under way)."""
    sim = Simulator("epoch", brokers=2, seed=1, config=dict(FAST, **{"local.retention.bytes": -1}),
                    keep_logs=True)
    sim.create_topic("log", 1, 2)
    sim.hold(A, STORE, P.PUT_OBJECT)
    for n in range(4):
        op = sim.produce("log", 0, [f"m{n:02d}"], acks="all")
        assert sim.run_until(lambda: op.status == "ok", 5000)
    assert sim.run_until(lambda: sim.held(A, STORE), 2000)
    return sim


def test_a_copy_cut_by_a_store_crash_is_abandoned_and_done_again():
    sim = copy_held_at_the_store()
    sim.crash(STORE)
    sim.unhold(A, STORE)
    sim.run_for(1000)                                      # the RLM tries every 200 ms
    assert [s["state"] for s in sim.remote_segments()] == [P.COPY_SEGMENT_STARTED]
    assert sum("abandoned" in text for _, text in sim.logs) >= 4
    sim.restart(STORE)
    assert sim.run_until(lambda: finished(sim) == [(0, 2)], 3000)
    assert len(sim.remote_segments()) == 1                 # done again under the same id
    assert [r[3] for r in consumer_read(sim, A, 0)["records"]] == ["m00", "m01", "m02", "m03"]


def test_a_copy_under_way_when_leadership_moves_finishes_and_the_next_leader_copies_again():
    sim = copy_held_at_the_store()
    sim.partition(A, CTL)                                  # A's session expires: B leads
    assert sim.run_until(lambda: sim.leader("log", 0) == B and sim.replica(B).role == "leader", 10000)
    assert sim.run_until(lambda: finished(sim) == [(0, 2)], 3000)      # B's copy
    sim.heal()
    sim.unhold(A, STORE)                                   # A's copy goes on and finishes
    assert sim.run_until(lambda: finished(sim) == [(0, 2), (0, 2)], 5000)
    copiers = sorted((s["broker"], s["leader_epoch"]) for s in sim.remote_segments())
    assert copiers == [(A, 0), (B, 1)]
    answer = consumer_read(sim, B, 0)
    assert [r[3] for r in answer["records"]] == ["m00", "m01", "m02", "m03"]


def test_whole_log_retention_deletes_remote_segments_and_moves_the_log_start():
    sim = tiered_leader(**{"retention.bytes": 150})
    assert sim.run_until(lambda: sim.replica(A).log_start == 6, 5000)
    states = {(s["base"], s["state"]) for s in sim.remote_segments()}
    assert {(0, P.DELETE_SEGMENT_FINISHED), (3, P.DELETE_SEGMENT_FINISHED), (6, P.COPY_SEGMENT_FINISHED)} <= states
    assert all(not k.startswith("log-0/00000000000000000000-") for k in sim.objects)
    assert consumer_read(sim, A, 0)["error"] == P.OFFSET_OUT_OF_RANGE
    assert [r[3] for r in consumer_read(sim, A, 6)["records"]] == ["m06", "m07", "m08"]

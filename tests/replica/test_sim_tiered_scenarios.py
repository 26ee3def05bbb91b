"""The seed's three tiered-storage follower scenarios (KIP-405), step by step.

Each test builds the seed's starting world in the simulator with the real cores
(leaders change by crashes, so epochs and epoch caches come from the protocol,
not from a fixture), then holds the follower's requests to step it through
Fetching -> OFFSET_MOVED_TO_TIERED_STORAGE -> ListOffsets(EARLIEST_LOCAL) ->
BuildingRemoteLogAux -> Fetching, asserting at every step the logs, the epoch
caches, the remote segments, their metadata and objects, the ELO answers and
the follower's state. Scenario 3 follows replica/TIERED.md, which writes down
the steps the seed leaves out. Values are ``m00``.. (25 bytes a record), so
``log.segment.bytes`` 75 makes segments of three records as in the seed.
"""

from replica import protocol as P
from replica import storage as S
from replica.core.tiered import BUILDING_AUX
from replica.sim import Simulator
from replica.sim.disk import SimDisk
from replica.sim.simulator import CTL, STORE
import pytest

pytestmark = pytest.mark.unit

NEVER_MS = 10 ** 9
A, B, C, D = 1, 2, 3, 4


def world(brokers: int, **extra) -> Simulator:
    config = {"min.insync.replicas": 1, "remote.storage.enable": True, "log.segment.bytes": 75,
              "remote.log.manager.task.interval.ms": NEVER_MS, "log.retention.check.interval.ms": NEVER_MS,
              "local.retention.bytes": 74}
    config.update(extra)
    sim = Simulator("epoch", brokers=brokers, seed=1, config=config)
    sim.create_topic("log", 1, brokers)
    return sim


def produce(sim, *numbers):
    for n in numbers:
        op = sim.produce("log", 0, [f"m{n:02d}"], acks="all")
        assert sim.run_until(lambda: op.status != "pending", 20000) and op.status == "ok", op
        assert op.offset == n


def lead(sim, b):
    assert sim.run_until(lambda: sim.leader("log", 0) == b and sim.replica(b).role == "leader", 40000)


def in_sync(sim, *bs):
    assert sim.run_until(lambda: all(b in sim.isr("log", 0) for b in bs)
                         and all(sim.leo(b) == sim.leo(sim.leader("log", 0)) for b in bs), 40000)


def log_of(sim, b):
    """[(offset, epoch, value)] of a replica's local log."""
    return [(o, e, v) for o, e, v in sim.log(b)]


def msgs(*spec):
    """msgs((0, 2, 0), (3, 4, 1)) -> [(0, 0, "m00"), ..., (4, 1, "m04")] (first, last, epoch)."""
    return [(n, e, f"m{n:02d}") for first, last, e in spec for n in range(first, last + 1)]


def remote_table(sim):
    """Per remote segment: (base, end, segment epochs, state, copied by, in epoch,
    its records (offset, epoch, value), its leader-epoch checkpoint)."""
    rows = []
    for seg in sim.remote_segments():
        data = sim.remote_object("log", 0, seg, "log")
        records = [(r.offset, r.epoch, r.value) for r in S.decode_records(data, seg["base"])]
        checkpoint = S.parse_leader_epoch_checkpoint(sim.remote_object("log", 0, seg, "epochs"))
        index = S.decode_offset_index(sim.remote_object("log", 0, seg, "index"), seg["base"])
        assert index[0] == (seg["base"], 0)
        rows.append((seg["base"], seg["end"], [tuple(e) for e in seg["epochs"]], seg["state"],
                     seg["broker"], seg["leader_epoch"], records, checkpoint))
    return rows


FIN = P.COPY_SEGMENT_FINISHED


def follower_state(sim, b):
    p = sim.replica(b)
    return p.fetch_state, p.local_start, p.leo, sim.epochs(b)


def omts_then_elo(sim, follower, leader):
    """Deliver the follower's held fetch (answered OMTS) and return the ELO answer
    (held on its way back) as (offset, leader_epoch), with the follower's state then."""
    sim.hold(leader, follower, P.LIST_OFFSETS, kind="response")
    sim.hold(follower, CTL, P.LIST_REMOTE_SEGMENTS)
    sim.fetch_round(follower, leader)
    assert sim.run_until(lambda: sim.held(leader, follower), 1000)
    answer = sim.held(leader, follower)[0][7]
    return (answer["error"], answer["offset"], answer["leader_epoch"]), follower_state(sim, follower)


def enter_aux(sim, follower, leader):
    """Release the ELO answer: the follower truncates and enters BuildingRemoteLogAux
    (its metadata request is held)."""
    sim.unhold(leader, follower)
    assert sim.run_until(lambda: sim.held(follower, CTL), 1000)
    return follower_state(sim, follower)


def build_aux(sim, follower):
    """Release the metadata request: the follower reads the remote metadata and the
    epoch checkpoint and returns to Fetching (its next fetch is held)."""
    sim.unhold(follower, CTL)
    assert sim.run_until(lambda: sim.replica(follower).fetch_state == "fetching"
                         and sim.replica(follower).aux is None, 2000)
    return follower_state(sim, follower)


def test_scenario_1_fresh_follower():
    sim = world(4, **{"local.retention.bytes": 150})
    sim.crash(B)                                   # B: a new, empty broker later
    sim.nodes[B].disk = SimDisk()
    sim.run_for(31000)
    produce(sim, 0, 1, 2)                          # LE-0 (leader A)
    sim.crash(A)
    lead(sim, C)
    produce(sim, 3, 4)                             # LE-1 (leader C)
    sim.crash(C)
    lead(sim, D)                                   # D's RLM copies seg-0-2
    produce(sim, 5, 6)                             # LE-2 (leader D; D copies seg-3-5)
    sim.restart(A)
    sim.restart(C)
    in_sync(sim, A, C)
    sim.crash(D)
    lead(sim, A)
    produce(sim, 7)                                # LE-3 (leader A)
    sim.run_task(A, "retention")                   # local retention: seg 0-2 is remote
    # The seed's starting tables.
    assert log_of(sim, A) == msgs((3, 4, 1), (5, 6, 2), (7, 7, 3))
    assert sim.hw(A) == 8 and sim.replica(A).log_start == 0 and sim.replica(A).local_start == 3
    assert sim.epochs(A) == [(0, 0), (1, 3), (2, 5), (3, 7)]
    assert sim.leader_epoch("log", 0) == 3
    assert remote_table(sim) == [
        (0, 2, [(0, 0)], FIN, D, 2, msgs((0, 2, 0)), [(0, 0)]),
        (3, 5, [(1, 3), (2, 5)], FIN, D, 2, msgs((3, 4, 1), (5, 5, 2)), [(0, 0), (1, 3), (2, 5)])]
    # Step 1: B (new) fetches offset 0, gets OMTS, gets ELO 3 in LE-1, rebuilds up to the ELO.
    sim.hold(B, A, P.FETCH)
    sim.restart(B)
    assert sim.run_until(lambda: sim.replica(B) is not None and sim.replica(B).role == "follower", 30000)
    assert follower_state(sim, B) == ("fetching", 0, 0, [])
    elo, state = omts_then_elo(sim, B, A)
    assert sim.responses.get((B, P.FETCH)) == 1
    assert elo == (None, 3, 1)
    assert state == ("fetching", 0, 0, [])
    assert enter_aux(sim, B, A) == (BUILDING_AUX, 3, 3, [])
    assert build_aux(sim, B) == ("fetching", 3, 3, [(0, 0), (1, 3)])
    # Step 2: B fetches from 3 to the HW.
    sim.fetch_round(B, A)
    assert log_of(sim, B) == msgs((3, 4, 1), (5, 6, 2), (7, 7, 3))
    assert sim.epochs(B) == [(0, 0), (1, 3), (2, 5), (3, 7)]
    assert sim.hw(B) == 8 and sim.replica(B).log_start == 0


def test_scenario_2_out_of_sync_follower():
    A, C, D, B = 1, 2, 3, 4                        # leaders are elected in replica order
    sim = world(4)
    produce(sim, 0, 1, 2)                          # LE-0 (leader A)
    sim.crash(A)
    lead(sim, C)
    produce(sim, 3)                                # LE-1 (leader C)
    assert sim.run_until(lambda: sim.leo(B) == 4, 5000)
    sim.crash(B)                                   # B stops at 3
    sim.run_for(31000)                             # B leaves the ISR (session, lag time)
    produce(sim, 4)
    sim.crash(C)
    lead(sim, D)                                   # D's RLM copies seg-0-2
    produce(sim, 5, 6)                             # LE-2 (leader D; D copies seg-3-5)
    sim.restart(A)
    sim.restart(C)
    in_sync(sim, A, C)
    sim.crash(D)
    lead(sim, A)
    produce(sim, 7, 8, 9)                          # LE-3 (leader A)
    sim.restart(D)
    in_sync(sim, C, D)
    # Step 1: the seed's tables; B starts in Truncating, OffsetsForLeaderEpoch(LE-1) = 5.
    assert log_of(sim, A) == msgs((0, 2, 0), (3, 4, 1), (5, 6, 2), (7, 9, 3)) and sim.hw(A) == 10
    assert sim.epochs(A) == [(0, 0), (1, 3), (2, 5), (3, 7)]
    assert remote_table(sim) == [
        (0, 2, [(0, 0)], FIN, D, 2, msgs((0, 2, 0)), [(0, 0)]),
        (3, 5, [(1, 3), (2, 5)], FIN, D, 2, msgs((3, 4, 1), (5, 5, 2)), [(0, 0), (1, 3), (2, 5)])]
    sim.hold(B, A, P.OFFSETS_FOR_LEADER_EPOCH)
    sim.hold(A, B, P.OFFSETS_FOR_LEADER_EPOCH, kind="response")
    sim.hold(B, A, P.FETCH)
    sim.restart(B)
    assert sim.run_until(lambda: sim.held(B, A), 30000)
    assert log_of(sim, B) == msgs((0, 2, 0), (3, 3, 1))
    assert follower_state(sim, B) == ("truncating", 0, 4, [(0, 0), (1, 3)])
    assert sim.held(B, A)[0][7]["leader_epoch"] == 1
    sim.release(B, A)
    assert sim.run_until(lambda: sim.held(A, B), 1000)
    answer = sim.held(A, B)[0][7]
    assert (answer["leader_epoch"], answer["end_offset"]) == (1, 5)
    sim.unhold(A, B)
    assert sim.run_until(lambda: sim.replica(B).fetch_state == "fetching", 1000)
    assert follower_state(sim, B) == ("fetching", 0, 4, [(0, 0), (1, 3)])   # no truncation
    # Step 2: A writes 10, 11, copies seg-6-8, local retention deletes up to 8.
    assert sim.run_until(lambda: any(e[6] == P.FETCH for e in sim.held(B, A)), 2000)
    produce(sim, 10, 11)
    sim.run_task(A, "rlm")
    sim.run_task(A, "retention")
    assert log_of(sim, A) == msgs((9, 11, 3)) and sim.hw(A) == 12 and sim.replica(A).local_start == 9
    assert remote_table(sim)[2] == (6, 8, [(2, 5), (3, 7)], FIN, A, 3, msgs((6, 6, 2), (7, 8, 3)),
                                    [(0, 0), (1, 3), (2, 5), (3, 7)])
    assert len(remote_table(sim)) == 3
    # B fetches offset 4: OMTS; ELO 9 in LE-3; B truncates its whole log, BuildingRemoteLogAux.
    elo, state = omts_then_elo(sim, B, A)
    assert elo == (None, 9, 3)
    assert state == ("fetching", 0, 4, [(0, 0), (1, 3)])
    assert enter_aux(sim, B, A) == (BUILDING_AUX, 9, 9, [])
    assert log_of(sim, B) == []
    # Step 3: B rebuilds the epochs from the remote metadata and data, fetches from 9.
    assert build_aux(sim, B) == ("fetching", 9, 9, [(0, 0), (1, 3), (2, 5), (3, 7)])
    sim.fetch_round(B, A)
    assert log_of(sim, B) == msgs((9, 11, 3)) and sim.hw(B) == 12
    assert sim.epochs(B) == [(0, 0), (1, 3), (2, 5), (3, 7)]


def test_scenario_3_multiple_hard_failures():
    """replica/TIERED.md, "Scenario 3": both brokers fail in turn, leadership moves
    through epochs 1, 3 and 4, segments are tiered by A, B, A, A, and each returning
    replica rebuilds its epochs from metadata written in epochs it never saw."""
    sim = world(2, **{"log.roll.ms": 60000})
    # Step 1: A and B hold 0..2 in LE-0; A rolls its quiet segment and copies seg-0-2.
    produce(sim, 0, 1, 2)
    assert sim.run_until(lambda: sim.hw(B) == 3, 2000)
    sim.run_for(60000)
    sim.run_task(A, "retention")                  # rolls the quiet active segment (log.roll.ms)
    sim.run_task(A, "rlm")
    assert log_of(sim, A) == log_of(sim, B) == msgs((0, 2, 0))
    assert sim.hw(A) == sim.hw(B) == 3
    assert sim.epochs(A) == sim.epochs(B) == [(0, 0)]
    assert remote_table(sim) == [(0, 2, [(0, 0)], FIN, A, 0, msgs((0, 2, 0)), [(0, 0)])]
    # Step 2: A fails; B leads in LE-1, writes 3..6, copies seg-3-5, deletes 0..5 locally.
    sim.crash(A)
    lead(sim, B)
    assert sim.leader_epoch("log", 0) == 1
    produce(sim, 3, 4, 5, 6)
    sim.run_task(B, "rlm")
    sim.run_task(B, "retention")
    assert log_of(sim, B) == msgs((6, 6, 1)) and sim.hw(B) == 7
    assert (sim.replica(B).log_start, sim.replica(B).local_start) == (0, 6)
    assert sim.epochs(B) == [(0, 0), (1, 3)]
    assert remote_table(sim)[1:] == [(3, 5, [(1, 3)], FIN, B, 1, msgs((3, 5, 1)), [(0, 0), (1, 3)])]
    # Step 3: B fails too (no leader, LE-2); B returns and leads in LE-3; A returns:
    # Truncating keeps 0..2, its fetch at 3 gets OMTS, ELO 6 in LE-1 (an epoch A never saw).
    sim.crash(B)
    assert sim.run_until(lambda: sim.leader("log", 0) is None, 20000)
    assert sim.leader_epoch("log", 0) == 2
    sim.restart(B)
    lead(sim, B)
    assert sim.leader_epoch("log", 0) == 3 and sim.epochs(B) == [(0, 0), (1, 3), (3, 7)]
    assert log_of(sim, B) == msgs((6, 6, 1)) and sim.replica(B).local_start == 6
    sim.hold(A, B, P.FETCH)
    sim.restart(A)
    assert sim.run_until(lambda: sim.replica(A) is not None and sim.replica(A).fetch_state == "fetching"
                         and sim.held(A, B), 30000)
    assert follower_state(sim, A) == ("fetching", 0, 3, [(0, 0)])
    elo, state = omts_then_elo(sim, A, B)
    assert elo == (None, 6, 1) and state == ("fetching", 0, 3, [(0, 0)])
    assert enter_aux(sim, A, B) == (BUILDING_AUX, 6, 6, [])
    assert build_aux(sim, A) == ("fetching", 6, 6, [(0, 0), (1, 3)])
    sim.fetch_round(A, B)
    assert log_of(sim, A) == msgs((6, 6, 1))
    sim.unhold(A, B)
    produce(sim, 7)                                # LE-3
    in_sync(sim, A)
    assert log_of(sim, A) == msgs((6, 6, 1), (7, 7, 3)) and sim.epochs(A) == [(0, 0), (1, 3), (3, 7)]
    # Step 4: B writes 8, 9 and fails again; A leads in LE-4, copies seg-6-8 at once,
    # writes 10..12, copies seg-9-11, deletes 6..11 locally.
    produce(sim, 8, 9)
    assert sim.run_until(lambda: sim.leo(A) == 10 and sim.hw(A) == 10, 2000)
    sim.crash(B)
    lead(sim, A)
    assert sim.leader_epoch("log", 0) == 4 and sim.epochs(A) == [(0, 0), (1, 3), (3, 7), (4, 10)]
    produce(sim, 10, 11, 12)
    sim.run_task(A, "rlm")
    sim.run_task(A, "retention")
    assert log_of(sim, A) == msgs((12, 12, 4)) and sim.replica(A).local_start == 12 and sim.hw(A) == 13
    assert remote_table(sim)[2:] == [
        (6, 8, [(1, 3), (3, 7)], FIN, A, 4, msgs((6, 6, 1), (7, 8, 3)), [(0, 0), (1, 3), (3, 7)]),
        (9, 11, [(3, 7), (4, 10)], FIN, A, 4, msgs((9, 9, 3), (10, 11, 4)),
         [(0, 0), (1, 3), (3, 7), (4, 10)])]
    # Step 5: B returns with 6..9; Truncating (LE-3 ends at 10) keeps them; its fetch at 10
    # gets OMTS, ELO 12 in LE-4 (an epoch B never saw): B drops 6..9 and rebuilds.
    sim.hold(B, A, P.FETCH)
    sim.restart(B)
    assert sim.run_until(lambda: sim.replica(B) is not None and sim.replica(B).fetch_state == "fetching"
                         and sim.held(B, A), 30000)
    assert log_of(sim, B) == msgs((6, 6, 1), (7, 9, 3))
    assert follower_state(sim, B) == ("fetching", 6, 10, [(0, 0), (1, 3), (3, 7)])
    elo, _ = omts_then_elo(sim, B, A)
    assert elo == (None, 12, 4)
    assert enter_aux(sim, B, A) == (BUILDING_AUX, 12, 12, [])
    assert build_aux(sim, B) == ("fetching", 12, 12, [(0, 0), (1, 3), (3, 7), (4, 10)])
    sim.fetch_round(B, A)
    assert log_of(sim, B) == log_of(sim, A) == msgs((12, 12, 4))
    # A consumer reads the whole log from 0: offsets 0..11 only from remote storage.
    got, offset = [], 0
    while offset < 13:
        answer = sim.request(A, {"api": P.FETCH, "topic": "log", "partition": 0, "offset": offset,
                                 "replica_id": -1, "max_records": 100})
        assert answer["error"] is None, answer
        got.extend((r[0], r[3]) for r in answer["records"])
        offset = got[-1][0] + 1
    assert got == [(n, f"m{n:02d}") for n in range(13)]
    assert sorted(sim.remote_records()) == list(range(12))

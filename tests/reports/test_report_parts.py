"""The report's building blocks on small hand-written inputs."""

from __future__ import annotations

from reports.anomalies import collect, verdict
from reports.diff_grid import build_grid, differences_by_key, replica_logs
from reports.ops import fault_intervals, fault_table, pair_ops
from reports.replica_plots import partition_series
from reports.grudges import parse_grudge
import pytest

pytestmark = pytest.mark.unit


def _line(i, t, p, kind, f, value=None):
    return {"index": i, "time": t, "process": p, "type": kind, "f": f, "value": value}


def test_pairing_joins_invocations_with_completions():
    history = [
        _line(0, 0, 0, "invoke", "send", [0, 1]),
        _line(1, 1, 1, "invoke", "poll"),
        _line(2, 5, 0, "ok", "send", [0, [0, 1]]),
        _line(3, 6, 1, "info", "poll"),
        _line(4, 7, 2, "invoke", "send", [0, 2]),  # never completes
    ]
    ops = pair_ops(history)
    assert [(op.process, op.type, op.start, op.end, op.indices) for op in ops] == [
        (0, "ok", 0, 5, (0, 2)), (1, "info", 1, 6, (1, 3)), (2, "info", 7, 7, (4,))]
    assert ops[0].invoke_value == [0, 1] and ops[0].value == [0, [0, 1]]


def test_fault_intervals_from_nemesis_ops():
    history = [
        _line(0, 10, "nemesis", "invoke", "kill", ["n1"]), _line(1, 11, "nemesis", "info", "kill", ["n1"]),
        _line(2, 20, "nemesis", "info", "partition", {"grudge": {"n1": ["n2"]}}),
        _line(3, 30, "nemesis", "info", "start", ["n1"]),
        _line(4, 40, "nemesis", "info", "final"),
        _line(5, 45, "nemesis", "info", "freeze", ["n3"]),  # never thawed
        _line(6, 50, "nemesis", "info", "pause-node"),       # no fault of this run says so: a marker
    ]
    table = {"kill": {"start": "kill", "stop": "start", "colour": "#d62728"},
             "partition": {"start": "partition", "stop": "heal", "colour": "#1f77b4"},
             "pause": {"start": "freeze", "stop": "thaw", "colour": "#9467bd"}}   # names come from the run
    faults, markers = fault_intervals(pair_ops(history), end_of_test=60, table=table)
    assert [(f.kind, f.start, f.end, f.colour) for f in faults] == [
        ("kill", 10, 30, "#d62728"), ("partition", 20, 40, "#1f77b4"), ("pause", 45, 60, "#9467bd")]
    assert faults[0].label == "kill n1 .. start n1"
    assert [m.f for m in markers] == ["final", "pause-node"]


def test_without_a_table_in_the_run_the_registered_faults_name_the_ops():
    from harness import registry
    table = fault_table({})
    assert set(table) == set(registry.names(registry.FAULTS))
    assert table["kill"] == {"start": "kill", "stop": "start", "colour": registry.fault("kill").colour}
    assert fault_table({"faults": {"x": {"start": "a", "stop": "b", "colour": "red"}}}) == \
        {"x": {"start": "a", "stop": "b", "colour": "red"}}


def test_grudge_in_every_shape():
    want = {"n1": frozenset({"n2", "n3"}), "n2": frozenset({"n1"}), "n3": frozenset({"n1"})}
    assert parse_grudge({"grudge": {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}}) == want
    assert parse_grudge({"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}) == want
    assert parse_grudge([["n1"], ["n2", "n3"]]) == want
    assert parse_grudge({"components": [["n1"], ["n2", "n3"]]}) == want
    assert parse_grudge("majority") is None and parse_grudge(None) is None


def test_verdict_sentences():
    bad = {"valid": False, "checkers": {"log": {"valid": False, "counts": {"lost-write": 1},
                                                "examples": {"lost-write": [{"key": 3, "ops": [1]}]}}}}
    assert verdict(bad, collect(bad), 10) == ("invalid", "Invalid: 1 acknowledged write lost on partition 3.")
    good = {"valid": True, "checkers": {"log": {"valid": True, "counts": {"lost-write": 0}}}}
    assert verdict(good, collect(good), 1234)[1] == "Valid: the checkers (log) found no anomaly in 1,234 history ops."
    unknown = {"valid": "unknown", "checkers": {"linearizability": {"valid": "unknown", "error": "time limit"}}}
    assert verdict(unknown, collect(unknown), 5) == (
        "unknown", "Unknown: the checkers could not decide (linearizability: time limit).")
    assert verdict(None, [], 0)[0] == "unknown"


def _dumps(hw1, hw2):
    return {
        "n1": {"partitions": [{"partition": 0, "hw": hw1, "leo": 4,
                               "records": [[0, 0, 10, "a"], [1, 0, 11, "b"], [2, 1, 12, "c"], [3, 1, 13, "d"]]}]},
        "n2": {"partitions": [{"partition": 0, "hw": hw2, "leo": 3,
                               "records": [[0, 0, 10, "a"], [1, 0, 11, "b"], [2, 2, 99, "X"]]}]},
    }


def _grid(dumps):
    """Partition 0's grid, with the replica diff's differences as a report reads them."""
    return build_grid(0, replica_logs(dumps)[0], differences_by_key(None, dumps).get(0, {}))


def test_diff_grid_marks_divergence_holes_and_hw():
    grid = _grid(_dumps(3, 3))
    assert grid.divergent == [2] and grid.differing == [] and grid.missing == 1
    cells = {row.offset: [c.css for c in row.cells] for row in grid.rows}
    assert cells[2] == ["divergent", "divergent"]
    assert cells[3] == ["hw", "missing hw"]


def test_diff_grid_tells_uncommitted_tails_apart():
    grid = _grid(_dumps(2, 2))
    assert grid.divergent == [] and grid.differing == [2]
    cells = {row.offset: [c.css for c in row.cells] for row in grid.rows}
    assert cells[2] == ["differs hw", "differs hw"]


def test_samples_give_elections_and_isr_changes():
    def sample(t, node, leader, epoch, isr, leo, role="leader"):
        return {"time": t, "node": node, "state": {"partitions": [
            {"partition": 0, "role": role, "leader": leader, "leader_epoch": epoch, "isr": isr,
             "leo": leo, "hw": leo - 1}]}}
    samples = [sample(0, "n1", 1, 0, [1, 2], 5), sample(1, "n1", 1, 0, [1], 6),
               sample(2, "n2", 2, 1, [2], 6), {"bogus": True}]
    series = partition_series(samples, set())[0]
    assert series.elections == [(2, 1, 2)]
    assert series.isr_changes == [(1, ("1",)), (2, ("2",))]
    assert series.by_node["n1"] == [(0, 5, 4), (1, 6, 5)]


def test_tiered_samples_give_log_starts_and_the_remote_band():
    from reports.replica_plots import _by_time, replica_plot

    def sample(t, node, start, local, remote, leo):
        return {"time": t, "node": node, "state": {"partitions": [
            {"partition": 0, "role": "leader" if node == "n1" else "follower", "leader": 1, "leader_epoch": 0,
             "isr": [1, 2], "leo": leo, "hw": leo, "log_start": start, "local_log_start": local,
             "remote_end": remote}]}}
    samples = [sample(0, "n1", 0, 0, -1, 3), sample(0, "n2", 0, 0, -1, 3),
               sample(10, "n1", 0, 6, 6, 9), sample(12, "n2", 0, 3, 6, 9)]
    series = partition_series(samples, set())[0]
    assert series.tiered and series.tiers["n2"] == [(0, 0, 0, -1), (12, 0, 3, 6)]
    assert _by_time(series.tiers)[10] == [(0, 6, 6), (0, 0, -1)]
    assert replica_plot(series, []).startswith("data:image/")
    untiered = partition_series([sample(0, "n1", 0, 0, -1, 3)], set())[0]
    assert not untiered.tiered


def test_overlapping_fault_bands_take_different_lanes():
    from reports.timeline import lanes

    spans = [(0, 10), (5, 15), (12, 20), (16, 30), (1, 2)]
    got = lanes(spans)
    for i, (a, b) in enumerate(spans):
        for j, (c, d) in enumerate(spans[:i]):
            if a <= d and c <= b:  # they overlap
                assert got[i] != got[j], (spans[i], spans[j], got)
    assert max(got) <= 2


def test_partition_labels_say_who_was_cut_off():
    from reports.grudges import grudge_text, parse_grudge

    assert grudge_text(parse_grudge({"grudge": {"n1": ["n2"], "n2": ["n1"]}})) == "n1 | n2"
    assert grudge_text(parse_grudge({"grudge": {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}})) == "n1 | n2 n3"
    assert grudge_text(parse_grudge({"grudge": {"n1": ["n2"]}})) == "n1 drops n2"


def test_diff_grid_names_a_divergence_of_the_leader_epoch_alone():
    """The replica diff counts copies that differ only in their leader epoch as divergent (the
    false-alarm campaign's corrupt cell: a flipped bit in the epoch, outside the record's CRC);
    the grid shows them so, and says that the records themselves agree."""
    dumps = _dumps(3, 3)
    dumps["n2"]["partitions"][0]["records"][1] = [1, 1024, 11, "b"]   # n1 holds [1, 0, 11, "b"]
    grid = _grid(dumps)
    assert grid.divergent == [1, 2] and grid.epoch_only == [1]
    row = next(r for r in grid.rows if r.offset == 1)
    assert [c.css for c in row.cells] == ["divergent", "divergent"]
    assert [c.text for c in row.cells] == ["b (epoch 0)", "b (epoch 1024)"]
    assert [c.text for c in next(r for r in grid.rows if r.offset == 2).cells] == ["c", "X"]


def test_a_divergence_story_says_when_the_records_differ_only_in_their_epoch():
    from reports.diff_grid import divergent_records
    from reports.story import stories

    dumps = _dumps(3, 3)
    dumps["n2"]["partitions"][0]["records"][1] = [1, 1024, 11, "b"]   # n1 holds [1, 0, 11, "b"]
    told = {s.offset: s.now for s in stories([], [], [], [], [], [], divergent_records(differences_by_key(None, dumps)))}
    assert told == {1: "the same record in different leader epochs: n1: b (epoch 0), n2: b (epoch 1024)",
                    2: "replicas hold n1: c (epoch 1), n2: X (epoch 2)"}


def test_a_lost_transactional_write_has_its_story_with_the_transaction_before_it():
    """kafka-late-commit's loss as the report tells it: the committed transaction's send that
    no final read returned, its producer, the same process's aborted transaction before it,
    and what the replicas hold at its offset (the aborted transaction's value)."""
    from reports.story import held_records, held_values, stories

    producer = {"id": 1, "epoch": 0, "end_epoch": 0}
    history = [
        _line(0, 1_000_000_000, 2, "invoke", "txn", [["send", 0, 1]]),
        {**_line(1, 1_500_000_000, 2, "ok", "txn", [["send", 0, [0, 1]]]), "producer": producer},
        _line(2, 2_000_000_000, 2, "invoke", "txn", [["send", 0, 2]]),
        {**_line(3, 6_600_000_000, 2, "fail", "txn", [["send", 0, 2]]), "producer": producer,
         "error": "send: not acknowledged in 2000 ms"},
        _line(4, 8_000_000_000, 2, "invoke", "txn", [["send", 0, 3]]),
        {**_line(5, 8_100_000_000, 2, "ok", "txn", [["send", 0, [2, 3]]]), "producer": producer},
        _line(6, 9_000_000_000, "nemesis", "info", "final"),
        _line(7, 9_100_000_000, 3, "invoke", "poll"),
        _line(8, 9_200_000_000, 3, "ok", "poll", {"0": [[0, 1]]}),
    ]
    records = [[0, 0, 10, 1], [1, 0, 11, "commit"], [2, 0, 12, 2], [3, 0, 13, "abort"], [4, 0, 14, "commit"]]
    dumps = {n: {"partitions": [{"partition": 0, "hw": 5, "leo": 5, "records": records}]} for n in ("n1", "n2")}
    logs = replica_logs(dumps)
    told = stories(history, [], [], [], [], [], [], held_values(logs), held_records(logs))
    assert [(s.key, s.offset, s.value, s.kind) for s in told] == [(0, 2, 3, "lost")]
    story = told[0]
    assert [e.op for e in story.txn] == [5, 3]
    assert "committed transaction of process 2 (producer 1, epoch 0)" in story.txn[0].text
    assert "op 3 fail: send: not acknowledged in 2000 ms (producer 1, epoch 0)" in story.txn[1].text
    assert story.now.startswith("value 2 (sent by op 3, process 2, fail) in n1, n2"), story.now

"""What results.json says about a scenario run, from a hand-made store shaped
like the one of a real hw-data-loss run in era hw: two acknowledged writes
(offsets 3 and 4) lost, n2 truncated 5 -> 3, then n1 truncated 5 -> 3."""
from __future__ import annotations

import json

import pytest

from checkers.check_store import check_store
from harness import run_store
from scenarios import load_scenario, results
from systems.replica.inspector import log_events

pytestmark = pytest.mark.unit


def events(store):
    return log_events(store / "nodes" / "n1" / "broker.log", "n1") + \
        log_events(store / "nodes" / "n2" / "broker.log", "n2")

LOG_N1 = """\
2026-11-21T19:45:10.100Z broker-1 broker 1: log-0: leader in epoch 0 at leo 0 hw 0 isr [1, 2]
2026-11-21T19:45:19.486Z broker-1 broker 1: log-0: truncated from leo 5 to 3
"""
LOG_N2 = """\
2026-11-21T19:45:15.493Z broker-2 broker 2: log-0: truncated from leo 5 to 3
2026-11-21T19:45:17.000Z broker-2 broker 2: log-0: shrinking ISR [2, 1]: [1] out of sync
2026-11-21T19:45:19.488Z broker-2 broker 2: log-0: expanding ISR [2] with 1 (leo 3 >= hw 3)
"""


def _history():
    ops, t = [], 0

    def add(process, type_, f, value):
        nonlocal t
        t += 1
        ops.append({"index": len(ops), "time": t, "process": process, "type": type_, "f": f, "value": value})

    for value, offset in ((1, 0), (2, 1), (3, 2), (4, 3), (5, 4)):
        add(1, "invoke", "send", [0, value])
        add(1, "ok", "send", [0, [offset, value]])
    add("nemesis", "info", "kill", ["n2"])
    for value, offset in ((6, 3), (7, 4)):
        add(1, "invoke", "send", [0, value])
        add(1, "ok", "send", [0, [offset, value]])
    add("nemesis", "info", "final", {"healed": True})
    add(2, "invoke", "poll", None)
    add(2, "ok", "poll", {"0": [[0, 1], [1, 2], [2, 3], [3, 6], [4, 7]]})
    return ops


def _dump(broker, records, hw):
    return {"broker": broker, "partitions": [{"topic": "log", "partition": 0, "hw": hw, "leo": len(records),
                                              "log_start": 0, "records": records}]}


@pytest.fixture
def store(tmp_path):
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in _history()))
    good = [[0, 0, 0, 1], [1, 0, 0, 2], [2, 0, 0, 3], [3, 1, 0, 6], [4, 1, 0, 7]]
    for node, log, records in (("n1", LOG_N1, good), ("n2", LOG_N2, good)):
        d = tmp_path / "nodes" / node
        d.mkdir(parents=True)
        (d / "broker.log").write_text(log)
        (d / "dump.json").write_text(json.dumps(_dump(int(node[1]), records, 5)))
    samples = [{"time": 1, "node": "n1", "state": {"partitions": [{"partition": 0, "leo": 5}]}},
               {"time": 2, "node": "n1", "state": {"partitions": [{"partition": 0, "leo": 3}]}},
               {"time": 3, "node": "n1", "state": {"partitions": [{"partition": 0, "leo": 5}]}}]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples) + '{"torn')
    return tmp_path


def scenario_store(store, name: str, variant: str, aliases: dict, error: str | None = None,
                   writes: list | None = None):
    """Make the store a scenario run's: scenario.json's declared outcome, and the ops the
    run appends to the history (bindings, the error, the log events, the end)."""
    from history.writer import FINAL_READS, SCENARIO

    scenario = load_scenario(name)
    (store / "scenario.json").write_text(json.dumps({"judged": results.declared(scenario, variant)}))
    ops = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    ops = [o for o in ops if o["process"] != SCENARIO and o["f"] != FINAL_READS]
    more = [(SCENARIO, "info", "bind", aliases)]
    if error:
        more.append((SCENARIO, "fail", "error", error))
    else:
        more.append(("nemesis", "info", FINAL_READS, {"complete": True}))
    more += [(SCENARIO, "info", "events", events(store)),
             (SCENARIO, "info", "end", {"writes": writes or [], "duration_s": 1.0})]
    for process, type_, f, value in more:
        ops.append({"index": len(ops), "time": len(ops) + 1, "process": process, "type": type_, "f": f,
                    "value": value})
    (store / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    return store


def test_unread_acknowledged_are_the_log_checkers_losses_with_the_acknowledging_op(store):
    scenario_store(store, "hw-data-loss", "hw", {"A": "n2", "B": "n1"}, writes=[{"key": 0, "value": 4, "acks": "all"}])
    out = check_store(str(store))
    lost = out["scenario"]["unread_acknowledged"]
    assert [(w["key"], w["offset"], w["value"], w["op"], w["anomaly"]) for w in lost] == \
        [(0, 3, 4, 7, "lost-write"), (0, 4, 5, 9, "lost-write")]
    assert lost[0]["acks"] == "all" and len(lost) == out["checkers"]["log"]["counts"]["lost-write"]
    scenario_store(store, "hw-data-loss", "hw", {"A": "n2"}, error="step 3 (wait): timed out")
    assert check_store(str(store))["scenario"]["unread_acknowledged"] is None  # no final phase: unknown


def test_truncation_points_and_isr_changes_from_the_broker_logs(store):
    truncations, isr = results.split_events(events(store))
    assert [(t["node"], t["from"], t["to"]) for t in truncations] == [("n2", 5, 3), ("n1", 5, 3)]
    assert [(e["change"], e["node"]) for e in isr] == [("shrink", "n2"), ("expand", "n2")]
    assert isr[1]["leo"] == 3 and isr[1]["hw"] == 3 and isr[1]["replica"] == "n1"
    drops = results.leo_drops(run_store.read_samples(store))
    assert [(d["node"], d["from"], d["to"]) for d in drops] == [("n1", 5, 3)]


def test_divergence_is_the_replica_diffs_differences(store):
    dumps = {"n1": _dump(1, [[0, 0, 0, "m0"], [1, 2, 0, "new"]], 2),
             "n2": _dump(2, [[0, 0, 0, "m0"], [1, 0, 0, "m1"], [2, 2, 0, "x"]], 2)}
    for node, dump in dumps.items():
        (store / "nodes" / node / "dump.json").write_text(json.dumps(dump))
    scenario_store(store, "hw-data-loss", "hw", {"A": "n2", "B": "n1"})
    out = check_store(str(store))
    d = out["scenario"]["divergence"]
    assert len(d) == 1 and d[0]["offset"] == 1 and d[0]["committed"]
    assert d[0]["replicas"]["n1"]["value"] == "new" and d[0]["replicas"]["n2"]["value"] == "m1"
    assert out["checkers"]["replica-diff"]["counts"]["divergence"] == 1


def test_verdict_expectation_and_truncation_check(store):
    scenario_store(store, "hw-data-loss", "hw", {"A": "n2", "B": "n1"})
    out = check_store(str(store))
    sc = out["scenario"]
    assert out["checkers"]["log"]["counts"]["lost-write"] == 2
    assert out["valid"] is False and sc["as_expected"] is True
    assert sc["forbidden_found"]["lost-write"] == 2
    scenario_store(store, "hw-data-loss", "epoch", {"A": "n2", "B": "n1"})
    out = check_store(str(store))
    assert out["valid"] is False and out["scenario"]["as_expected"] is False


def test_allowed_anomalies_are_set_aside_but_reported(store):
    scenario_store(store, "epoch-truncation", "epoch", {"A": "n1", "B": "n2", "C": "n3"})   # acks=1: losing writes is allowed
    out = check_store(str(store))
    sc = out["scenario"]
    assert sc["allowed_found"]["lost-write"] == 2 and not sc["forbidden_found"]
    # the seed's order is B (n2) then A (n1), both to 3: the logs above say exactly that
    assert sc["truncation_check"]["match"] and out["valid"] is True and sc["as_expected"]
    scenario_store(store, "epoch-truncation", "epoch", {"A": "n2", "B": "n1"})
    out = check_store(str(store))
    assert out["valid"] is False and "truncation points differ" in out["scenario"]["reasons"][-1]


def test_a_measurement_takes_the_broker_log_time_and_is_checked_against_its_bound(store):
    _, isr = results.split_events(events(store))
    since = results._wall("2026-11-21T19:45:12.000Z")
    m = {"name": "shrink", "ms": 5100.0, "bound_ms": 6000.0, "within": True, "event": "isr-shrink",
         "since_wall": since}
    results.refine_measurement(m, isr)
    assert m["ms"] == 5000.0 and m["source"] == "broker log" and m["within"]
    m = {"name": "rejoin", "ms": 1.0, "bound_ms": None, "event": "isr-expand", "since_wall": since}
    results.refine_measurement(m, isr)
    assert m["ms"] == 7488.0 and m["leo_reached_hw"] and (m["follower_leo"], m["leader_hw"]) == (3, 3)
    m = {"name": "shrink", "ms": 1.0, "bound_ms": 4000.0, "within": True, "event": "isr-shrink",
         "since_wall": since}
    results.refine_measurement(m, isr)
    assert m["within"] is False


def test_a_step_error_makes_the_verdict_unknown(store):
    scenario_store(store, "hw-data-loss", "hw", {"A": "n2"}, error="step 3 (wait): timed out")
    out = check_store(str(store))
    assert out["valid"] == "unknown" and out["error"].startswith("step 3")


def _shrink_line(age, gap, lag=4000):
    return [{"time": "2026-11-21T19:45:17.900Z", "node": "n1", "key": 0, "change": "shrink", "isr": [1, 2, 3],
             "out": [2], "caught_up_ms": [age], "check_gap_ms": gap, "lag_ms": lag}]


def test_a_shrink_with_the_leaders_account_is_checked_against_the_protocol_not_the_cut(tmp_path):
    """The leader's own record (caught up N ms ago, previous check M ms ago)
    bounds the shrink: lag < N <= lag + M, whatever the time since the cut."""
    since = results._wall("2026-11-21T19:45:11.000Z")
    line = ("2026-11-21T19:45:17.900Z broker-1 broker 1: log-0: shrinking ISR [1, 2, 3]: [2] out of sync "
            "(caught up [5950] ms ago, previous check 2080 ms ago, replica.lag.time.max.ms=4000)")
    (tmp_path / "broker.log").write_text(line + "\n")
    [ev] = log_events(tmp_path / "broker.log", "n1")
    assert (ev["caught_up_ms"], ev["check_gap_ms"], ev["lag_ms"]) == ([5950], 2080, 4000)
    for age, gap, within in [(5950, 2080, True), (4001, 2000, True), (3999, 2000, False), (6100, 2000, False)]:
        meas = {"name": "shrink", "ms": 1.0, "bound_ms": 6000.0, "within": True, "event": "isr-shrink",
                "since_wall": since}
        results.refine_measurement(meas, _shrink_line(age, gap))
        assert meas["within"] is within and meas["ms"] == age and meas["since_cut_ms"] == 6900.0
        assert (meas["min_ms"], meas["bound_ms"]) == (4000.0, 4000.0 + gap)


def test_harness_check_rebuilds_the_scenario_verdict_from_the_history(store):
    """results.json has one writer (harness.verdict); `harness check` rebuilds the scenario's
    section from scenario.json and the history, results.json deleted or not."""
    from harness import verdict

    scenario_store(store, "hw-data-loss", "epoch", {"A": "n2", "B": "n1"})
    first = verdict.check_store(store)
    assert first["valid"] is False and first["scenario"]["as_expected"] is False  # epoch must lose nothing
    (store / "results.json").unlink()
    again = verdict.check_store(store)              # what `harness check` does
    assert again["scenario"] == first["scenario"] and again["valid"] is False
    assert json.loads((store / "results.json").read_text()) == again
    assert not (store / "scenario-results.json").exists()


def test_an_old_store_with_scenario_results_json_is_still_judged(store):
    """A store written before the history kept the scenario's ops keeps its old section."""
    from harness import verdict

    scenario_store(store, "hw-data-loss", "hw", {"A": "n2", "B": "n1"})
    old = check_store(str(store))
    ops = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    (store / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops if o["process"] != "scenario"))
    (store / "scenario-results.json").write_text(json.dumps({"valid": old["valid"], "scenario": old["scenario"]}))
    (store / "results.json").write_text(json.dumps({"valid": True}))  # an old `harness check` dropped it
    out = verdict.check_store(store)
    assert out["valid"] is False and out["scenario"]["as_expected"] is True


def test_a_checker_that_does_not_apply_to_the_workload_is_no_finding():
    """The queue workload's histories are not for the replica diff (`applies: false`): its counts
    of aborted records and markers (missing-committed) neither fail nor cloud the scenario's verdict;
    the same counts from a checker that applies do."""
    checked = {"valid": True, "checkers": {
        "txn": {"valid": True, "counts": {}},
        "replica-diff": {"applies": False, "valid": "unknown", "counts": {"missing-committed": 2}}}}
    out = results.judge(checked, {"allowed_anomalies": []})
    assert out["valid"] is True and out["scenario"]["reasons"] == []
    checked["checkers"]["replica-diff"]["applies"] = True
    out = results.judge(checked, {"allowed_anomalies": []})
    assert out["valid"] is False and out["scenario"]["reasons"] == ["missing-committed x2"]

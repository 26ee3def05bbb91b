"""What one finished run of a campaign showed: its verdict, the anomalies it
found, and the time to its first anomaly.

Time to first anomaly = the history time of the earliest op that an
anomaly's examples name (an `ops` list or an `op` of results.json), in
seconds since the test started. Only the listed examples are looked at (the
checkers keep the first ones they find), so it is the earliest op among
those.
"""
from __future__ import annotations

from pathlib import Path

from checkers.checker import merge_valid
from harness import registry
from harness.run_store import faults_drawn, op_times, read_legacy_scenario_results, read_results
from reports.anomalies import collect, example_ops


def verdict_word(valid) -> str:
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


def run_verdict(store: Path | None, scenario: bool, checkers: list[str] | None = None) -> dict:
    """{"verdict", "as_expected" (scenario runs), "anomalies" {name: count}, "ops"} of one run dir.

    With `checkers`, the verdict is theirs alone (False if one is False, True
    if all are True, else unknown), for systems some checker cannot judge.
    """
    if store is None:
        return {"verdict": "unknown", "anomalies": {}, "note": "no run directory"}
    results = read_results(store)
    if results is None:
        return {"verdict": "unknown", "anomalies": {}, "note": "no results.json (the run did not finish)"}
    out = {"verdict": verdict_word(results.get("valid")), "anomalies": anomaly_counts(results),
           "ops": (results.get("stats") or {}).get("ops")}
    if results.get("error"):
        out["note"] = str(results["error"]).splitlines()[0][:300]
    if checkers:
        found = [((results.get("checkers") or {}).get(name) or {}).get("valid") for name in checkers]
        out["verdict"] = verdict_word(merge_valid(found))
        out["note"] = f"judged on {', '.join(checkers)}" + (f"; {out['note']}" if out.get("note") else "")
    if scenario:
        sc = read_legacy_scenario_results(store) or {}
        block = results.get("scenario") or sc.get("scenario") or {}
        out["verdict"] = verdict_word(results.get("valid") if results.get("scenario") else sc.get("valid", results.get("valid")))
        out["as_expected"] = block.get("as_expected")
        out["expected"] = block.get("expected")
    return out


def anomaly_counts(results: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in collect(results):
        counts[a.name] = counts.get(a.name, 0) + a.count
    return counts


def first_anomaly_s(store: Path) -> float | None:
    """Seconds from test start to the earliest op an anomaly names; None without anomalies."""
    results = read_results(store)
    if results and "first_anomaly_s" in results:   # harness.verdict.first_times wrote it
        return results["first_anomaly_s"]
    wanted = {i for a in collect(results) for e in a.examples for i in example_ops(e)} if results else set()
    if not wanted:
        return None
    times = op_times(store / "history.jsonl", wanted)
    return min(times.values()) / 1e9 if times else None


def faults_of(store: Path) -> dict:
    """{"faults": {kind: starts}, "plays": {targeted play: times}} of one run: what a
    valid run was valid under (a false-alarm campaign is only as good as its faults)."""
    starts = {registry.fault(n).start for n in registry.names(registry.FAULTS)}
    return faults_drawn(store / "history.jsonl", starts)

"""From the campaign folder to the campaign's outcome: each cell's runs and
status, time to first anomaly, the comparison with the previous campaign of
the same file, and the exit code.

Cell status, against the cell's expectation:
- valid: every run valid;
- invalid (a known bug): at least one run found an anomaly (random faults
  find a bug in some runs, not all);
- scenario: every run met the scenario library's declared verdict;
- any: not asserted (only an unknown run counts against it).
`as-expected`, `unexpected`, `unknown` (a run could not decide and nothing
settles the cell), or `not-run` (the budget or a stop left it out).

Comparison with the previous finished campaign of the same name in the
same store root, per cell id: `new-failure` (as expected then, not now),
`fixed` (not then, now), `still-failing`, `same`, `new` (no such cell then).
A cell is `flaky` when its runs disagree where they should agree (valid and
invalid in a cell expected valid, or a scenario cell) or when it changed
status in this comparison and in the previous one too.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from harness.campaign.folder import CampaignFolder, previous_finished
from harness.campaign.matrix import variant_of
from harness.campaign.verdicts import faults_of, first_anomaly_s, run_verdict

OK = "as-expected"


def run_rows(folder: CampaignFolder, cell: dict, states: dict) -> list[dict]:
    rows = []
    for run in cell["runs"]:
        st = states.get(run["id"])
        row = {"id": run["id"], "seed": run["seed"], "tag": run["tag"], "attempts": len(st.attempts) if st else 0,
               "partial_attempts": list(st.partial) if st else [], "note": None, "report": None, "store": None,
               "ttfa_s": None, "seconds": None, "exit": None, "attempt": None, "as_expected": None,
               "faults": {}, "plays": {}}
        if st is None or not st.done:
            rows.append({**row, "verdict": "not-run", "anomalies": {}})
            continue
        store = folder.path / st.end["store"] if st.end.get("store") else None
        row.update(run_verdict(store, cell["kind"] == "scenario", cell.get("checkers")))
        row.update({"exit": st.end.get("exit"), "seconds": st.end.get("seconds"),
                    "store": st.end.get("store"), "attempt": st.end.get("attempt")})
        if store is not None:
            report = store / "report.html"
            row["report"] = str(report.relative_to(folder.path)) if report.is_file() else None
            row["ttfa_s"] = first_anomaly_s(store) if row["anomalies"] else None
            row.update(faults_of(store))
        rows.append(row)
    return rows


def cell_status(expect: str, runs: list[dict]) -> str:
    done = [r for r in runs if r["verdict"] != "not-run"]
    if not done:
        return "not-run"
    verdicts = [r["verdict"] for r in done]
    if expect == "valid":
        if "invalid" in verdicts:
            return "unexpected"
        return OK if all(v == "valid" for v in verdicts) else "unknown"
    if expect == "invalid":
        if "invalid" in verdicts:
            return OK
        return "unknown" if "unknown" in verdicts else "unexpected"
    if expect == "scenario":
        if any(r.get("as_expected") is False for r in done):
            return "unexpected"
        return OK if all(r.get("as_expected") is True for r in done) else "unknown"
    return "unknown" if "unknown" in verdicts else OK


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def summarize(folder: CampaignFolder, notes: list[str] | None = None) -> dict:
    """The campaign's summary.json (without the comparison)."""
    states = folder.run_states()
    cells = []
    for cell in folder.cells():
        runs = run_rows(folder, cell, states)
        done = [r for r in runs if r["verdict"] != "not-run"]
        ttfa = [r["ttfa_s"] for r in done if r.get("ttfa_s") is not None]
        counts = {v: sum(1 for r in done if r["verdict"] == v) for v in ("valid", "invalid", "unknown")}
        status = cell_status(cell["expect"], runs)
        # runs that disagree where they should agree (a known bug found by some random runs is normal)
        mixed = counts["valid"] > 0 and counts["invalid"] > 0 and cell["expect"] in ("valid", "scenario")
        cells.append({**{k: cell[k] for k in ("id", "label", "kind", "system", "nemesis", "workload",
                                              "scenario", "backend", "expect", "why")},
                      "variant": variant_of(cell),
                      "checkers": cell.get("checkers"),
                      "runs": runs, "counts": {"planned": len(runs), "done": len(done), **counts},
                      "with_anomaly": sum(1 for r in done if r["anomalies"]),
                      "ttfa_median_s": median(ttfa), "status": status, "as_expected": status == OK,
                      "mixed": mixed})
    all_runs = [r for c in cells for r in c["runs"] if r["verdict"] != "not-run"]
    ttfa = [r["ttfa_s"] for r in all_runs if r.get("ttfa_s") is not None]
    totals = {"cells": len(cells), "as_expected": sum(c["as_expected"] for c in cells),
              "not_run": sum(c["status"] == "not-run" for c in cells),
              "runs": len(all_runs), "planned": sum(c["counts"]["planned"] for c in cells),
              **{v: sum(1 for r in all_runs if r["verdict"] == v) for v in ("valid", "invalid", "unknown")},
              "with_anomaly": sum(1 for r in all_runs if r["anomalies"]),
              "ttfa_median_s": median(ttfa)}
    totals["pass_rate"] = round(totals["as_expected"] / totals["cells"], 4) if cells else None
    totals["anomaly_fraction"] = round(totals["with_anomaly"] / totals["runs"], 4) if all_runs else None
    return {"name": folder.name, "stamp": folder.stamp, "file": folder.plan.get("file"),
            "created": folder.plan.get("created"), "description": folder.plan.get("description", ""),
            "cells": cells, "totals": totals, "notes": list(notes or [])}


def compare(summary: dict, previous: dict | None) -> dict:
    """Adds each cell's `comparison` and `flaky`; -> {"previous", "new_failures", "fixed", "flaky"}."""
    before = {c["id"]: c for c in (previous or {}).get("cells", [])}
    out = {"previous": previous["stamp"] if previous else None, "new_failures": [], "fixed": [], "flaky": []}
    for cell in summary["cells"]:
        prev = before.get(cell["id"])
        now_ok = cell["as_expected"]
        if cell["status"] == "not-run":
            change = "not-run"
        elif prev is None or prev["status"] == "not-run":
            change = "new"
        elif prev["as_expected"] and not now_ok:
            change = "new-failure"
        elif not prev["as_expected"] and now_ok:
            change = "fixed"
        else:
            change = "same" if now_ok else "still-failing"
        cell["comparison"] = change
        cell["previous_status"] = prev["status"] if prev else None
        cell["changed"] = change in ("new-failure", "fixed")
        cell["flaky"] = cell["mixed"] or (cell["changed"] and bool(prev and prev.get("changed")))
        if change == "new-failure":
            out["new_failures"].append(cell["id"])
        elif change == "fixed":
            out["fixed"].append(cell["id"])
        if cell["flaky"]:
            out["flaky"].append(cell["id"])
    return out


def exit_code(summary: dict) -> int:
    """0 every cell as expected, 1 some cell not (including cells left unrun)."""
    return 0 if all(c["as_expected"] for c in summary["cells"]) else 1


def outcome(folder: CampaignFolder, notes: list[str] | None = None) -> dict:
    """summarize + compare with the previous finished campaign of the same name in this store root."""
    summary = summarize(folder, notes)
    store_root = folder.path.parents[2]
    prev_folder = previous_finished(store_root, folder.name, folder.stamp)
    summary["comparison"] = compare(summary, prev_folder.summary() if prev_folder else None)
    if prev_folder is not None:
        summary["comparison"]["previous_path"] = str(Path("..") / prev_folder.stamp)
    summary["exit_code"] = exit_code(summary)
    return summary


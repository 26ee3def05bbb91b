"""From checkers to results.json and exit codes (0 valid, 1 invalid, 2
unknown or error). The one place that decides what results.json says: the
checkers' results (a scenario's verdict among them: the `scenario` checker,
rebuilt from the history by every `harness check`), written once by
harness.run_store.write_results."""
from __future__ import annotations

from pathlib import Path

from harness import run_store


def exit_code(results: dict | None) -> int:
    valid = (results or {}).get("valid")
    return 0 if valid is True else 1 if valid is False else 2


def _judged(store_dir, checked: dict) -> dict:
    """A scenario store written before its history kept the scenario's ops (the `scenario`
    checker judged nothing) keeps its verdict: its old section is re-judged."""
    if "scenario" in checked:
        return checked
    section = run_store.read_scenario_section(store_dir)
    if section is None:
        return checked
    from scenarios.results import judge

    return judge(checked, section)


def _example_ops(example) -> list[int]:
    """History indices one anomaly example names: its `ops` list and its `op`
    (ints or ops with an index); reports.anomalies.example_ops reads them the same way."""
    if not isinstance(example, dict):
        return []
    found = example.get("ops", [])
    found = (found if isinstance(found, list) else [found]) + ([example["op"]] if "op" in example else [])
    return [x if isinstance(x, int) else x["index"] for x in found
            if (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, dict) and isinstance(x.get("index"), int))]


def first_times(store_dir, results: dict) -> dict:
    """Time to first anomaly: per checker section, `first_s` {anomaly: seconds from
    the test's start to the earliest op its examples name}, and at the top
    `first_anomaly_s` (the earliest of them; None without anomalies). Only
    the examples a checker kept are looked at, so it is the earliest op among
    those (checkers keep the first ones they meet)."""
    sections = {name: sec for name, sec in (results.get("checkers") or {}).items() if isinstance(sec, dict)}
    named: dict[tuple[str, str], list[int]] = {}
    for checker, sec in sections.items():
        counts = sec.get("counts") if isinstance(sec.get("counts"), dict) else {}
        for name, exs in (sec.get("examples") if isinstance(sec.get("examples"), dict) else {}).items():
            if counts and not counts.get(name):
                continue
            exs = exs if isinstance(exs, list) else [exs]
            named[(checker, str(name))] = [i for e in exs for i in _example_ops(e)]
    wanted = {i for ops in named.values() for i in ops}
    times = run_store.op_times(Path(store_dir) / run_store.HISTORY, wanted) if wanted else {}
    earliest = None
    for (checker, name), ops in named.items():
        ts = [times[i] for i in ops if i in times]
        if ts:
            first = round(min(ts) / 1e9, 3)
            sections[checker].setdefault("first_s", {})[name] = first
            earliest = first if earliest is None else min(earliest, first)
    results["first_anomaly_s"] = earliest
    return results


def workload_counts(store_dir, results: dict) -> dict:
    """results.json's `workload_counts`: what the workload counted as it ran (the history's
    `final-reads` op's `counts`, or an old store's test.json `final_reads.counts`; the queue
    workload: committed, aborted, indefinite, rebalances), and `client`: the final reads' client
    library, its version and the transaction protocol it negotiated (the queue workload)."""
    final = run_store.final_reads(Path(store_dir))
    counts = (final or {}).get("counts")
    if isinstance(counts, dict):
        results["workload_counts"] = counts
    client = (final or {}).get("client")
    if isinstance(client, dict):   # the queue workload: the client library and what it negotiated
        results["client"] = client
    return results


def check_store(store_dir: Path, engine: str = "local", master: str | None = None) -> dict:
    """Run the checkers on a store, judge, write results.json; -> the results."""
    from checkers import check_store as checkers_store

    checked = checkers_store.check_store(str(store_dir), engine=engine, master=master)
    results = workload_counts(store_dir, first_times(store_dir, _judged(store_dir, checked)))
    run_store.write_results(store_dir, results)
    return results


def check_stores(store_dirs: list[str], master: str | None = None, skip_bad: bool = False) -> dict[str, dict]:
    """Many stores in one Spark job (checkers.check_store.check_campaign); writes each results.json."""
    from checkers.check_store import check_campaign

    out = {}
    for store_dir, checked in check_campaign(store_dirs, master=master, skip_bad=skip_bad).items():
        if not Path(store_dir).is_dir():
            out[store_dir] = checked
            continue
        out[store_dir] = workload_counts(store_dir, first_times(store_dir, _judged(store_dir, checked)))
        run_store.write_results(store_dir, out[store_dir])
    return out


def unchecked(store_dir: Path, reason: str) -> dict:
    """results.json of a run whose checkers did not run (--no-check, or they failed)."""
    from checkers.check_store import judge_run

    results = {"valid": "unknown", "error": reason}
    try:   # a scenario's section still says what its steps did
        results = judge_run(str(store_dir), None, results)
    except Exception:
        pass
    run_store.write_results(store_dir, results)
    return results


def summary(results: dict) -> str:
    parts = [f"valid={results.get('valid')}"]
    for name, res in sorted((results.get("checkers") or {}).items()):
        if isinstance(res, dict):
            counts = {k: v for k, v in (res.get("counts") or {}).items() if v}
            undecided = {k: u.get("count") for k, u in (res.get("unknown") or {}).items()
                         if isinstance(u, dict)}
            parts.append(f"{name}={res.get('valid')}" + (f" {counts}" if counts else "")
                         + (f" undecided {undecided}: " + "; ".join(
                             sorted({u["reason"] for u in res["unknown"].values()
                                     if isinstance(u, dict) and u.get("reason")}))
                            if undecided else ""))
    if results.get("error"):
        parts.append(f"error: {results['error']}")
    stats = results.get("stats")
    if stats:
        parts.append("ops " + " ".join(f"{k}={v}" for k, v in stats.items()))
    return "; ".join(parts)

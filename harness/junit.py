"""JUnit XML for CI systems: one test case per run.

classname = system/variant/nemesis (a random run) or scenario/variant, name = the
seed; a failure for an invalid run (in a campaign: a run that contradicts its
cell's expectation), an error for unknown, with the verdict summary and the
report's path in the message. The schema CI systems read (Jenkins' xunit
junit-10.xsd, also used by pytest's own tests; tests/campaign/junit-10.xsd)
allows properties only on a test suite, so each run is a test suite of one
test case that carries the seed and store path as properties.

Written with the standard library's ElementTree: the format is a handful of
elements, and escaping is ElementTree's.
"""
from __future__ import annotations

import json
import os
import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Case:
    classname: str
    name: str
    outcome: str = "passed"          # passed | failure | error | skipped
    message: str = ""
    details: str = ""
    seconds: float = 0.0
    properties: dict = field(default_factory=dict)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_case(store: Path | None, classname: str | None = None, message_prefix: str = "") -> Case:
    """The case of one `harness run` / `harness scenario` store."""
    if store is None:
        return Case(classname or "harness", "run", "error", "the run did not start (no store)")
    from harness.verdict import summary
    from harness.registry import DEFAULT_SYSTEM
    from harness.run_store import read_results, read_scenario_section
    test, results = _read(store / "test.json"), read_results(store)
    scenario = (read_scenario_section(store) or {}).get("name")
    variant = test.get("variant") or test.get("era")
    if classname is None:
        classname = f"{scenario}/{variant}" if scenario else \
            f"{test.get('system') or DEFAULT_SYSTEM}/{variant}/{'+'.join(test.get('nemesis') or []) or 'none'}"
    seed = test.get("seed")
    valid = results.get("valid") if results else None
    report = store / "report.html"
    text = summary(results) if results else "no results.json: the run did not finish"
    where = f"report {report}" if report.is_file() else f"store {store}"
    outcome = "passed" if valid is True else "failure" if valid is False else "error"
    word = {"passed": "valid", "failure": "invalid", "error": "unknown"}[outcome]
    return Case(classname, f"seed-{seed}" if seed is not None else "run", outcome,
                f"{message_prefix}{word}: {text}; {where}", text,
                _duration(test, store), {"seed": seed, "store": str(store), "report": str(report)})


def _duration(test: dict, store: Path) -> float:
    """Seconds from the test's start to its last file (results.json), as well as the store knows."""
    try:
        start = time.mktime(time.strptime(test["start"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        end = max(p.stat().st_mtime for p in store.iterdir() if p.is_file())
        return max(0.0, end - start)
    except (KeyError, ValueError, OSError):
        return 0.0


def campaign_cases(folder: Path, summary: dict) -> list[Case]:
    """One case per planned run: judged against its cell's expectation."""
    cases = []
    previous = (summary.get("comparison") or {}).get("previous")
    for cell in summary["cells"]:
        for run in cell["runs"]:
            cases.append(_campaign_case(folder, cell, run, previous))
    return cases


def _campaign_case(folder: Path, cell: dict, run: dict, previous: str | None) -> Case:
    props = {"seed": run.get("seed"), "store": str(folder / run["store"]) if run.get("store") else "",
             "cell": cell["id"], "expect": cell["expect"], "cell_status": cell["status"],
             "comparison": cell.get("comparison", ""),
             # time to first anomaly: this run's, and the cell's median with the fraction of runs that found one
             "ttfa_s": run.get("ttfa_s"), "cell_ttfa_median_s": cell.get("ttfa_median_s"),
             "cell_with_anomaly": f"{cell.get('with_anomaly', 0)}/{(cell.get('counts') or {}).get('done', 0)}",
             # what the nemesis did: fault starts by kind, and the targeted plays
             "faults": _counts(run.get("faults")), "plays": _counts(run.get("plays"))}
    name = run["tag"]
    if run["verdict"] == "not-run":
        return Case(cell["label"], name, "skipped", "not run (budget spent or campaign stopped)", properties=props)
    anomalies = ", ".join(f"{k} {v}" for k, v in sorted(run["anomalies"].items())) or "no anomaly"
    report = folder / run["report"] if run.get("report") else None
    where = f"report {report}" if report else f"store {props['store']}"
    v, expect = run["verdict"], cell["expect"]
    if v == "unknown":
        outcome = "error"
    elif expect == "valid":
        outcome = "failure" if v == "invalid" else "passed"
    elif expect == "scenario":
        outcome = "failure" if run.get("as_expected") is False else "passed"
    elif expect == "invalid":
        outcome = "passed" if cell["as_expected"] else "failure"
    else:
        outcome = "passed"
    new = cell.get("comparison") == "new-failure"
    head = f"NEW FAILURE (as expected in campaign {previous}): " if new and outcome != "passed" else ""
    msg = (f"{head}{v}: {anomalies}; cell {cell['label']} expects {expect}"
           f"{' (' + cell['why'] + ')' if cell.get('why') else ''}, is {cell['status']}; {where}")
    return Case(cell["label"], name, outcome, msg, msg + (f"\n{run['note']}" if run.get("note") else ""),
                float(run.get("seconds") or 0.0), props)


def _counts(counts: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted((counts or {}).items()))


def write(path: Path, suite_name: str, cases: list[Case]) -> Path:
    """Write the document atomically; each case is a test suite of one test case."""
    root = ET.Element("testsuites", name=suite_name, tests=str(len(cases)),
                      failures=str(sum(c.outcome == "failure" for c in cases)),
                      errors=str(sum(c.outcome == "error" for c in cases)),
                      time=f"{sum(c.seconds for c in cases):.3f}")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    for c in cases:
        suite = ET.SubElement(root, "testsuite", name=f"{c.classname} {c.name}", tests="1",
                              failures=str(int(c.outcome == "failure")), errors=str(int(c.outcome == "error")),
                              skipped=str(int(c.outcome == "skipped")), time=f"{c.seconds:.3f}",
                              timestamp=stamp, hostname=socket.gethostname())
        props = ET.SubElement(suite, "properties")
        for k, v in c.properties.items():
            ET.SubElement(props, "property", name=str(k), value="" if v is None else str(v))
        case = ET.SubElement(suite, "testcase", classname=c.classname, name=c.name, time=f"{c.seconds:.3f}")
        if c.outcome != "passed":
            el = ET.SubElement(case, c.outcome, message=c.message, type=c.outcome)
            el.text = c.details or c.message
        else:
            ET.SubElement(case, "system-out").text = c.message
    ET.indent(root)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="UTF-8", xml_declaration=True)
    os.replace(tmp, path)
    return path

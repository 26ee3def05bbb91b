"""Build ``index.html`` over every run in a store root: the campaign overview.

A run is any directory holding ``test.json``, ``history.jsonl`` or
``results.json``; ``latest`` links are not followed, so each run appears once.
Only the small files are read, so indexing a root of big runs stays quick.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from harness.run_store import HISTORY, RESULTS, TEST

from . import anomalies as anomalies_mod
from .render import render
from .report import build_report, test_summary
from .rerun import duration_s, rerun_command
from .store_reader import read_store

RUN_FILES = (TEST, HISTORY, RESULTS)


@dataclass
class RunRow:
    test: str
    variant: str
    nemesis: str
    time: str
    verdict: str
    counts: list[tuple[str, int]]
    total: int
    ops: str
    link: str | None
    path: str
    as_expected: str = ""  # scenario runs: "yes" / "NO"
    duration: str = ""  # seconds from the start to the last op
    seed: str = ""
    command: str = ""  # the command that runs it again


def find_runs(root: Path) -> list[Path]:
    runs = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if any(f in filenames for f in RUN_FILES):
            runs.append(Path(dirpath))
            dirnames.clear()  # a run's own subfolders (nodes/, plots/) hold no runs
        else:
            dirnames[:] = sorted(d for d in dirnames if not (Path(dirpath) / d).is_symlink())
    return sorted(runs)


def _verdict(results: dict | None) -> str:
    if results is None:
        return "none"
    valid = results.get("valid")
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


def run_row(root: Path, run: Path, build_missing: bool) -> RunRow:
    store = read_store(run, with_history=False)
    sc = (store.results or {}).get("scenario")
    summary = test_summary(store.test, store.path, str(sc.get("name")) if isinstance(sc, dict) else None)
    found = anomalies_mod.collect(store.results)
    counts: dict[str, int] = {}
    for a in found:
        counts[a.name] = counts.get(a.name, 0) + a.count
    report = run / "report.html"
    if build_missing and not report.exists():
        report = Path(build_report(run))
    stats = (store.results or {}).get("stats")
    ops = stats.get("ops") if isinstance(stats, dict) else None
    expected = sc.get("as_expected") if isinstance(sc, dict) else None
    took = duration_s(run / "history.jsonl")
    seed = store.test.get("seed")
    return RunRow(summary["name"], summary["variant"], summary["nemesis"], summary["start"],
                  _verdict(store.results), sorted(counts.items()), sum(counts.values()),
                  str(ops) if ops is not None else "",
                  os.path.relpath(report, root) if report.exists() else None,
                  os.path.relpath(run, root),
                  {True: "yes", False: "NO"}.get(expected, "") if isinstance(expected, bool) else "",
                  f"{took:.1f}" if took is not None else "", "" if seed is None else str(seed),
                  rerun_command(store.test, sc if isinstance(sc, dict) else None))


def build_index(store_root: str | Path, build_missing: bool = False) -> str:
    """Write ``index.html`` in ``store_root``; returns its path.

    ``build_missing`` also builds the report of every run that has none yet.
    """
    root = Path(store_root).resolve()
    rows = [run_row(root, run, build_missing) for run in find_runs(root)]
    rows.sort(key=lambda r: r.time, reverse=True)
    context = {
        "root": str(root),
        "rows": rows,
        "variants": sorted({r.variant for r in rows}),
        "verdicts": sorted({r.verdict for r in rows}),
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }
    out = root / "index.html"
    out.write_text(render("index.html.j2", context), encoding="utf-8")
    return str(out)

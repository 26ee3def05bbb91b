"""Check every finished run of a campaign in one Spark job.

Each run was already checked in-process when it ended (so a run's exit code
and --stop-on-first-invalid mean something while the campaign goes on); the
Spark job at the end is the campaign's verdict, as `harness campaign check`
has always done: `harness.verdict.check_stores` checks them and writes each
results.json (a scenario run keeps its scenario verdict: its findings in
results.json are re-judged with the new checker results).
A report is rebuilt when the verdict or the anomaly counts changed, or when
it is missing.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from harness import verdict
from harness.campaign.verdicts import anomaly_counts
from harness.run_store import read_results


class CheckError(RuntimeError):
    """The Spark job could not run (no Java, a bad master, ...); one line."""


ENGINES = ("auto", "spark", "local")

# `--engine auto` (the default) checks in-process below this much history and in one Spark
# job from it. Spark's start and the first queries of a check cost 25-40 CPU-s on this 2-core
# machine whatever the size (the smoke campaign's 6 runs, 0.4 MB of history: 80 s wall at
# load 5 in Spark, under 5 s in-process, 2026-11-29), while the local engine checks about a
# million ops (some 130 MB of history.jsonl) in well under a minute: below that, Spark only
# adds its start.
AUTO_SPARK_BYTES = 128 * 1024 * 1024


def choose_engine(stores: list[Path], engine: str = "auto", master: str | None = None) -> tuple[str, str]:
    """-> (spark | local, why) for the final check of `stores`. auto: Spark when a master is
    named (--master or $CHECKERS_SPARK_MASTER) or the histories reach AUTO_SPARK_BYTES."""
    if engine in ("spark", "local"):
        return engine, f"--engine {engine}"
    if engine != "auto":
        raise CheckError(f"--engine {engine!r}: use auto, spark or local")
    if master or os.environ.get("CHECKERS_SPARK_MASTER"):
        return "spark", "auto: a Spark master is named"
    size = sum((s / "history.jsonl").stat().st_size for s in stores if (s / "history.jsonl").is_file())
    mib = size / 1024 / 1024
    if size >= AUTO_SPARK_BYTES:
        return "spark", f"auto: {mib:.0f} MiB of history"
    return "local", f"auto: {mib:.1f} MiB of history, under {AUTO_SPARK_BYTES >> 20} MiB; --engine spark for one Spark job"


def failure_line(e: Exception) -> str:
    """The line that says why: a failed Spark job's exception (Py4JJavaError) starts with
    "An error occurred while calling o123.collect", and the cause (a Python worker's
    exception, a lost executor) is further down its text; the last Python exception line,
    else the first "Caused by", else the first line."""
    text = str(e)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    python = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): ", line)
              and not line.startswith(("org.", "java.", "py4j."))]
    caused = [line for line in lines if line.startswith("Caused by: ")]
    cause = python[-1] if python else caused[0] if caused else lines[0] if lines else ""
    head = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
    return (head if cause == (lines[0] if lines else "") else f"{head} ... {cause}")[:400]


def check_stores(stores: list[Path], master: str | None = None, log=print, engine: str = "auto",
                 chosen: tuple[str, str] | None = None) -> dict[str, dict]:
    """-> {store: results}; results.json (and report.html where needed) rewritten.

    engine "local" checks each run in-process instead (small campaigns, tests
    of the campaign logic), "auto" picks one by the histories' size (`choose_engine`;
    `chosen`: its answer, when the caller has it); the verdicts are the same.
    """
    if not stores:
        return {}
    engine, why = chosen or choose_engine(stores, engine, master)
    before = {str(s): read_results(s) for s in stores}
    log(f"checking {len(stores)} runs " + ("in one Spark job" if engine == "spark" else "in-process") + f" ({why})")
    try:
        if engine == "spark":
            found = verdict.check_stores([str(s) for s in stores], master=master, skip_bad=True)
        else:
            found = {str(s): verdict.check_store(s, engine="local") for s in stores}
    except Exception as e:  # a missing JVM or master is one line, and the runs keep their own results
        raise CheckError(f"the {engine} check failed ({failure_line(e)}); "
                         f"each run keeps the results of its own check") from None
    for store in stores:
        results = found.get(str(store))
        if results is None:
            continue
        old = before.get(str(store))
        if old is None or _changed(old, results) or not (store / "report.html").is_file():
            _report(store, log)
    return found


def _changed(old: dict, new: dict) -> bool:
    return old.get("valid") != new.get("valid") or anomaly_counts(old) != anomaly_counts(new)


def _report(store: Path, log) -> None:
    try:
        from reports import build_report
        build_report(str(store))
    except Exception as e:  # a report that fails never changes a verdict
        log(f"report of {store} failed: {type(e).__name__}: {e}")

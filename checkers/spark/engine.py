"""The Spark engine: check one run or a whole campaign of runs in one Spark job,
with every registered checker (harness.registry), as the local engine does.

A checker takes part through its Spark driver (`Checker.spark`, a module
name); a checker without one comes back `{"valid": "unknown", "note": "no
spark driver"}`, never absent. A driver module has

- `check(job: SparkJob) -> {run: result}`, called in its own thread, and
- optionally `key_work(job) -> KeyWork`: a Python kernel for the one key
  pass (`checkers.spark.key_pass`), whose answers `job.keyed(name)` gives.

Input: Parquet run dirs written by `history.parquet` (each row tagged with its
run name). Per-key checkers (log, replica diff, linearizability) are kernels of
the one key pass: one Spark task per core reads its keys' rows of every run once
with pyarrow and runs them all in its Python worker. Others (transactions) build
DataFrame jobs on the shared `checkers.spark.tables.Tables`; Spark interleaves the
jobs' tasks, so the cores stay busy while one driver plans or collects.
"""

from __future__ import annotations

import importlib
import os
import time
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from checkers.checker import data_checkers
from harness import registry

NO_DRIVER = {"valid": "unknown", "note": "no spark driver"}
NO_RESULT = {"valid": "unknown", "note": "its spark driver gave no result for this run"}

# Small inputs run interpreted. A check is ~56 short jobs; on a few thousand rows, compiling
# each stage's generated code (Janino, then the JIT on the new classes) costs more than it
# saves. Measured on two tiny stores (tests/data/stores), JVM CPU-s, load ~10: the first
# check in a JVM 68-70 compiled, 53 interpreted; a warm check 25-28 compiled, 20 interpreted
# (whole-stage codegen alone off: 22). Large inputs keep compiled code, where it pays.
# CHECKERS_SPARK_INTERPRETED_ROWS moves the threshold (0: always compiled).
INTERPRETED_ROWS = 200_000
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
# Tiny inputs (a test's store, a short run) also shuffle into one partition: every shuffle
# of the session's 8 partitions is 8 tasks to schedule, serialize and run for a few rows.
# Measured on test_interrupted's store (a dozen ops, ~30 jobs), warm, interleaved, load ~3:
# 8.4-9.2 JVM CPU-s against 12.9-14.1 with 8 partitions (2026-11-29); the same results.
ONE_PARTITION_ROWS = 20_000
ONE_PARTITION = {"spark.sql.shuffle.partitions": "1"}


@dataclass
class SparkJob:
    """What every Spark driver of one check shares."""

    tables: object                      # checkers.spark.tables.Tables
    runs: list[str]
    complete: dict[str, bool]           # run -> every data node left a readable dump
    time_limit: float | None            # linearizability's search limit
    _keyed: Future = field(default_factory=Future)

    def keyed(self, name: str) -> list:
        """[(run id, answer)] of checker `name`'s kernel in the key pass, one per run and task."""
        return self._keyed.result()[name]


def drivers(names: set[str] | None = None) -> dict[str, object]:
    """Registered checker name (of `names`, default all) -> its Spark driver module (None: it has none)."""
    out = {}
    for name, checker in data_checkers(registry.load_all(registry.CHECKERS)).items():
        if names is not None and name not in names:
            continue
        module = getattr(checker, "spark", None)
        try:
            out[name] = importlib.import_module(module) if module else None
        except ImportError as e:
            raise registry.RegistryError(f"checker {name!r}: Spark driver {module} cannot be loaded: {e}") from None
    return out


def check_runs(run_dirs: list[str], runs: list[str], master: str | None = None,
               complete: dict[str, bool] | None = None, spark=None,
               time_limit: float | None = None,
               timings: dict | None = None, names: set[str] | None = None) -> dict[str, dict]:
    """-> {run: {checker name: result}} for every run name in `runs` and every registered checker.

    runs[i] must be the run name written into run_dirs[i]'s tables. timings: if
    given, gets `checkers_s`: checker name -> seconds until its results were
    ready (they overlap). names: run only these checkers (checkers.applicable; default: those of a
    history of the default workload without transactions).
    """
    from checkers.spark.session import spark_session
    from checkers.spark.tables import Tables, input_rows

    started = time.monotonic()
    if names is None:  # a history of the default workload, without transactions
        from checkers.applicable import names_for

        names = set(names_for(None, False))
    found = drivers(names)
    active = {name: driver for name, driver in found.items() if driver is not None}
    done: dict[str, tuple] = {}
    if active:  # else every checker's answer is NO_DRIVER: no session, no job
        spark = spark or spark_session(master)
        rows = input_rows(run_dirs)
        with _execution_mode(spark, rows):
            done = _run_drivers(spark, Tables(spark, run_dirs, runs, rows=rows), runs, complete, time_limit,
                                active)
    if timings is not None:
        timings["checkers_s"] = {name: round(at - started, 1) for name, (at, _r) in done.items()}
    return {run: {name: done[name][1].get(run, dict(NO_RESULT)) if name in done else dict(NO_DRIVER)
                  for name in found}
            for run in runs}


def _run_drivers(spark, tables, runs, complete, time_limit, active) -> dict[str, tuple]:
    """{checker name: (the monotonic second its driver ended, its answer)}; releases `tables`."""
    beside = ThreadPoolExecutor(len(active), thread_name_prefix="beside")
    job = SparkJob(tables, list(runs), dict(complete or {}), time_limit)
    try:
        answers = {name: beside.submit(_stamped, driver.check, job) for name, driver in active.items()}
        _pass(job, active)
        return {name: answer.result() for name, answer in answers.items()}
    except BaseException:  # Ctrl-C or a failed job: stop the jobs of the other threads too
        spark.sparkContext.cancelAllJobs()
        raise
    finally:
        beside.shutdown(wait=True, cancel_futures=True)
        tables.release()


@contextmanager
def _execution_mode(spark, rows: int):
    """Interpreted expressions for the check of `rows` input rows if that is few (INTERPRETED_ROWS),
    and one shuffle partition if very few (ONE_PARTITION_ROWS); the session's settings are put
    back after it."""
    limit = int(os.environ.get("CHECKERS_SPARK_INTERPRETED_ROWS", INTERPRETED_ROWS))
    if rows > limit:
        yield
        return
    settings = {**INTERPRETED, **(ONE_PARTITION if rows <= ONE_PARTITION_ROWS else {})}
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _pass(job: SparkJob, active: dict) -> None:
    """The key pass of every driver with a `key_work` (one Spark job), into job._keyed
    (an exception too, so that no driver waits for it forever)."""
    from checkers.spark.key_pass import run_pass

    try:
        work = {name: driver.key_work(job) for name, driver in active.items()
                if hasattr(driver, "key_work")}
        job._keyed.set_result(run_pass(job.tables, work) if work else {})
    except BaseException as e:
        job._keyed.set_exception(e)
        raise


def _stamped(work, *args):
    """(the monotonic second `work` ended, its answer)."""
    answer = work(*args)
    return time.monotonic(), answer

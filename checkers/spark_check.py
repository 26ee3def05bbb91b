"""Check one run or a whole campaign of runs in one Spark job: log anomalies, replica diff
and linearizability.

Input: Parquet run dirs written by `checkers.parquet` (each row tagged with
its run name). The tables of `checkers.spark_tables` are built (their
per-key facts cached) once, every anomaly kind of both checkers is flagged
in one union and collected by one job, then a few small lookup jobs fill in
the listed examples, and the caches are released. The linearizability
checker's first pass (`spark_linear.settle`) runs in a second driver thread
beside the flag job, and its search beside the lookups: Spark interleaves the
jobs' tasks, so the cores stay busy while one job's driver side plans or
collects, or its stage has fewer tasks than cores.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from checkers import spark_diff, spark_linear, spark_log
from checkers.log_anomalies import MAX_EXAMPLES
from checkers.spark_flags import top_flags
from checkers.spark_session import spark_session
from checkers.spark_tables import Tables, k_of


def check_runs(run_dirs: list[str], runs: list[str], master: str | None = None,
               complete: dict[str, bool] | None = None, spark=None,
               time_limit: float | None = None,
               timings: dict | None = None) -> dict[str, dict]:
    """-> {run: {"log", "replica-diff", "linearizability": result}} for every run name in `runs`.

    runs[i] must be the run name written into run_dirs[i]'s tables. timings: if
    given, gets `anomalies_diff_s`, the seconds until the log and diff results
    were ready (the linearizability checker's own seconds are in its result;
    the two overlap).
    """
    started = time.monotonic()
    spark = spark or spark_session(master)
    tables = Tables(spark, run_dirs, runs)
    try:
        with ThreadPoolExecutor(2, thread_name_prefix="beside") as beside:
            settling = beside.submit(_timed, spark_linear.settle, tables)
            top = top_flags(spark_log.flags(tables) + spark_diff.flags(tables), runs,
                            MAX_EXAMPLES)
            log = beside.submit(_stamped, spark_log.results, tables, top)
            diff = beside.submit(_stamped, spark_diff.results, tables, top, complete)
            flagged = {k_of(tables.rids[run], example["key"])
                       for (run, _kind), (_count, examples) in top.items()
                       for example in examples if isinstance(example.get("key"), int)}
            linear = spark_linear.check_runs(tables, time_limit, flagged, settling.result())
            log, diff = log.result(), diff.result()
            if timings is not None:
                timings["anomalies_diff_s"] = round(
                    max(_ended(log), _ended(diff)) - started, 1)
    finally:
        tables.release()
    return {run: {"log": log[1][run], "replica-diff": diff[1][run],
                  "linearizability": linear[run]} for run in runs}


def _timed(work, *args):
    """(the monotonic second `work` began, its answer)."""
    return time.monotonic(), work(*args)


def _stamped(work, *args):
    """(the monotonic second `work` ended, its answer)."""
    answer = work(*args)
    return time.monotonic(), answer


def _ended(stamped) -> float:
    return stamped[0]

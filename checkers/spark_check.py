"""Check one run or a whole campaign of runs in one Spark job: log anomalies, replica diff
and linearizability.

Input: Parquet run dirs written by `checkers.parquet` (each row tagged with
its run name). The tables of `checkers.spark_tables` are built (their
per-key facts cached) once, every anomaly kind of both checkers is flagged
in one union and collected by one job, then a few small lookup jobs fill in
the listed examples, and the caches are released. Beside the flag job, a
second driver thread runs the window over each key's calls in time order
(`checkers.spark_sequential.settled_keys`), which serves twice: the
linearizability checker goes on in that thread with the keys it could not
settle, and the send-order kinds are flagged (one more job) only on the keys
whose acknowledged sends it did not find stepped. Spark interleaves the jobs'
tasks, so the cores stay busy while one job's driver side plans or collects,
or its stage has fewer tasks than cores, and the Python search works while
the JVM does.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from checkers import spark_diff, spark_linear, spark_log
from checkers.log_anomalies import MAX_EXAMPLES
from checkers.spark_flags import top_flags
from checkers.spark_sequential import settled_keys
from checkers.spark_session import spark_session
from checkers.spark_tables import Tables


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
    beside = ThreadPoolExecutor(4, thread_name_prefix="beside")
    try:
        order = beside.submit(_timed, lambda: settled_keys(tables).collect())
        linear = beside.submit(lambda: spark_linear.check_runs(tables, time_limit, order.result()))
        top = top_flags(spark_log.flags(tables) + spark_diff.flags(tables), runs, MAX_EXAMPLES)
        diff = beside.submit(_stamped, spark_diff.results, tables, top, complete)
        per_key, _seconds = order.result()
        send_order = spark_log.send_order(tables, {row["k"] for row in per_key
                                                   if not row["stepped"]})
        late = top_flags([send_order], runs, MAX_EXAMPLES) if send_order is not None else {}
        log = beside.submit(_stamped, spark_log.results, tables, {**top, **late})
        (log_done, log), (diff_done, diff), linear = log.result(), diff.result(), linear.result()
        if timings is not None:
            timings["anomalies_diff_s"] = round(max(log_done, diff_done) - started, 1)
    except BaseException:  # Ctrl-C or a failed job: stop the jobs of the other threads too
        spark.sparkContext.cancelAllJobs()
        raise
    finally:
        beside.shutdown(wait=True, cancel_futures=True)
        tables.release()
    return {run: {"log": log[run], "replica-diff": diff[run], "linearizability": linear[run]}
            for run in runs}


def _timed(work) -> tuple:
    """(its answer, the seconds `work` took)."""
    started = time.monotonic()
    answer = work()
    return answer, time.monotonic() - started


def _stamped(work, *args):
    """(the monotonic second `work` ended, its answer)."""
    answer = work(*args)
    return time.monotonic(), answer

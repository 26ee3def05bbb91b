"""Check one run or a whole campaign of runs in one Spark job: log anomalies, replica diff
and linearizability.

Input: Parquet run dirs written by `checkers.parquet` (each row tagged with
its run name). The tables of `checkers.spark_tables` are built (their
per-key facts cached) once, every anomaly kind of both checkers is flagged
in one union and collected by one job, then a few small lookup jobs fill in
the listed examples, and the caches are released.
"""

from __future__ import annotations

from checkers import spark_diff, spark_linear, spark_log
from checkers.log_anomalies import MAX_EXAMPLES
from checkers.spark_flags import top_flags
from checkers.spark_session import spark_session
from checkers.spark_tables import Tables, k_of


def check_runs(run_dirs: list[str], runs: list[str], master: str | None = None,
               complete: dict[str, bool] | None = None, spark=None,
               time_limit: float | None = None) -> dict[str, dict]:
    """-> {run: {"log", "replica-diff", "linearizability": result}} for every run name in `runs`.

    runs[i] must be the run name written into run_dirs[i]'s tables.
    """
    spark = spark or spark_session(master)
    tables = Tables(spark, run_dirs, runs)
    try:
        top = top_flags(spark_log.flags(tables) + spark_diff.flags(tables), runs, MAX_EXAMPLES)
        log = spark_log.results(tables, top)
        diff = spark_diff.results(tables, top, complete)
        flagged = {k_of(tables.rids[run], example["key"])
                   for (run, _kind), (_count, examples) in top.items()
                   for example in examples if isinstance(example.get("key"), int)}
        linear = spark_linear.check_runs(tables, time_limit, flagged)
    finally:
        tables.release()
    return {run: {"log": log[run], "replica-diff": diff[run], "linearizability": linear[run]}
            for run in runs}

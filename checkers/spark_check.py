"""Check one run or a whole campaign of runs in one Spark job: log anomalies and replica diff.

Input: Parquet run dirs written by `checkers.parquet` (each row tagged with
its run name). The events table and its two aggregates are built and cached
once, every anomaly kind of both checkers is flagged in one union and
collected by one job (plus a few tiny jobs for the sets listed in examples),
then the caches are released.
"""

from __future__ import annotations

from checkers import spark_diff, spark_log
from checkers.log_anomalies import MAX_EXAMPLES
from checkers.spark_events import build_events, offset_facts, top_flags, value_facts
from checkers.spark_session import spark_session


def check_runs(run_dirs: list[str], runs: list[str], master: str | None = None,
               complete: dict[str, bool] | None = None, spark=None) -> dict[str, dict]:
    """-> {run: {"log": result, "replica-diff": result}} for every run name in `runs`."""
    spark = spark or spark_session(master)
    events, replicas = build_events(spark, run_dirs)
    values = value_facts(events)
    offsets = offset_facts(events)
    try:
        top = top_flags(spark_log.flags(events, values, offsets)
                        + spark_diff.flags(values, offsets, replicas), MAX_EXAMPLES)
        log = spark_log.results(spark, events, top, runs)
        diff = spark_diff.results(spark, events, top, runs, complete)
    finally:
        for frame in (offsets, values, events, replicas):
            frame.unpersist()
    return {run: {"log": log[run], "replica-diff": diff[run]} for run in runs}

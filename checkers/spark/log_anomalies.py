"""The log checker's Spark driver: the check's keys dealt to Spark tasks, each checked by
the array kernel in a Python worker.

Every anomaly of the log checker is per key, so a task that has every row of some keys
answers for those keys completely. The engine's key pass (`checkers.spark.key_pass`)
reads each task's sends, reads and ends of every run with pyarrow (columnar, no row of
them in the JVM), once for this checker and the linearizability search, and runs
`checkers.log_arrays` on them: counts by sorting packed 64-bit integers, the
first examples from the in-process kernel itself on the first keys that have them. Only
that small answer per run comes back, and the tasks' answers merge by adding counts and
sorting examples by key (`checkers.log_arrays.merge`), so results are those of
`checkers.log_anomalies` (a test holds them identical).

Why not DataFrame jobs (this driver was, until 2026-11-30): on a 10M-line history they
were a hash aggregation of all 30M input rows (the triples T) and four windows, ~60 of
the check's JVM CPU-s; the kernel needs ~24 CPU-s per half of the keys, its read
included (docs/performance.md, issue 40).

Keys whose log was gone (ends.absent) are counted afterwards, as the local engine does
(`_absent`), from their few rows.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from history.flatten import END_COLUMNS, READ_COLUMNS, SEND_COLUMNS
from checkers.log_anomalies import absent_ends, absent_losses
from checkers.spark.key_pass import KeyWork
from checkers.spark.tables import Tables, key_in_run, run_id


def _key_findings(_rid: int, rows: dict) -> dict:
    """One run's rows of one task's keys -> `checkers.log_arrays.Findings`' fields (in the worker)."""
    from checkers import log_arrays

    return log_arrays.findings(rows["sends"], rows["reads"], rows["ends"]).__dict__


def key_work(_job) -> KeyWork:
    """The log checker's part of the engine's key pass (`checkers.spark.key_pass`)."""
    return KeyWork(("sends", "reads", "ends"), _key_findings)


def check(job) -> dict[str, dict]:
    """The log checker's Spark driver (checkers.spark.engine): the key pass's answers merged."""
    from checkers import log_arrays

    parts: dict[int, list] = {rid: [] for rid in range(len(job.runs))}
    for rid, found in job.keyed("log"):
        parts[rid].append(log_arrays.Findings(**found))
    out = {run: log_arrays.merge(parts[rid]).result() for rid, run in enumerate(job.tables.runs)}
    _absent(job.tables, out)
    return out


def _absent(tables: Tables, out: dict[str, dict]) -> None:
    """Keys whose log was gone (ends.absent): their few rows are collected and
    `checkers.log_anomalies.absent_losses` counts them, as the in-process kernel does."""
    ends = tables.ends.where(F.col("absent").isNotNull()).select("k", *END_COLUMNS[1:]).collect()
    if not ends:
        return
    only = {row["k"] for row in ends}
    sends = tables.raw("sends", only).select("k", *SEND_COLUMNS[1:]).collect()
    reads = tables.raw("reads", only).select("k", *READ_COLUMNS[1:]).collect()
    for rid, run in enumerate(tables.runs):
        def rows(found):
            return [(key_in_run(r[0]), *r[1:]) for r in found if run_id(r[0]) == rid]
        run_ends = rows(ends)
        if run_ends and run in out:
            absent_losses(out[run], absent_ends(run_ends), rows(sends), rows(reads), run_ends)

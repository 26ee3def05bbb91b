"""The log checker's Spark driver: key ranges dealt to Spark tasks, each checked by the
array kernel in a Python worker.

Every anomaly of the log checker is per key, so a task that has every row of a range of
keys answers for those keys completely. The keys of the check are cut into one
contiguous range per core (the same ranges in every run); each task reads its range's
sends, reads and ends of every run with pyarrow (columnar, no row of them in the JVM)
and runs `checkers.log_arrays` on them: counts by sorting packed 64-bit integers, the
first examples from the in-process kernel itself on the first keys that have them. Only
that small answer per run comes back; ranges in key order merge by adding counts and
concatenating examples (`checkers.log_arrays.merge`), so results are those of
`checkers.log_anomalies` (a test holds them identical).

Why not DataFrame jobs (this driver was, until 2026-11-30): on a 10M-line history they
were a hash aggregation of all 30M input rows (the triples T) and four windows, ~60 of
the check's JVM CPU-s; the kernel needs ~24 CPU-s per half of the keys, its read
included (docs/performance.md, issue 40).

Keys whose log was gone (ends.absent) are counted afterwards, as the local engine does
(`_absent`), from their few rows.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from history.flatten import END_COLUMNS, READ_COLUMNS, SEND_COLUMNS
from history.parquet import SCHEMAS, table_paths
from checkers.log_anomalies import absent_ends, absent_losses
from checkers.spark.tables import Tables, key_in_run, run_id

# Input rows per task below which a check runs in fewer tasks (a test's store: one):
# each task reads every run's three tables once.
ROWS_PER_TASK = 1_000_000
COLUMNS = {"sends": SEND_COLUMNS, "reads": (*READ_COLUMNS, "seq"), "ends": END_COLUMNS}


def key_span(run_dirs: list[str]) -> tuple[int, int] | None:
    """(lowest, highest) key of the runs' sends, reads and ends, from the Parquet footers'
    statistics (no data read), or None if there is no row."""
    lows, highs = [], []
    for table in COLUMNS:
        for path in table_paths(run_dirs, table):
            meta = pq.ParquetFile(path).metadata
            at = meta.schema.to_arrow_schema().get_field_index("key")
            for group in range(meta.num_row_groups):
                stats = meta.row_group(group).column(at).statistics
                if meta.row_group(group).num_rows == 0:
                    continue
                if stats is None or not stats.has_min_max:
                    keys = pq.read_table(path, columns=["key"])["key"]
                    lows.append(pc.min(keys).as_py())
                    highs.append(pc.max(keys).as_py())
                    break
                lows.append(stats.min)
                highs.append(stats.max)
    lows = [x for x in lows if x is not None]
    return (min(lows), max(x for x in highs if x is not None)) if lows else None


def ranges(span: tuple[int, int], tasks: int) -> list[tuple[int, int]]:
    """[lo, hi) key ranges covering span in `tasks` nearly equal parts, in key order."""
    low, high = span
    width = high - low + 1
    cuts = [low + width * i // tasks for i in range(tasks + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def range_findings(run_dirs: list[str], runs: list[str], low: int, high: int) -> list[tuple[int, dict]]:
    """[(run id, Findings' fields)] of every run's keys in [low, high): one task's work."""
    from checkers import log_arrays

    out = []
    for rid, (run_dir, run) in enumerate(zip(run_dirs, runs)):
        where = (pc.field("run") == run) & (pc.field("key") >= low) & (pc.field("key") < high)
        tables = {}
        for table, columns in COLUMNS.items():
            # the store's schema: a column an older table lacks (seq) reads as null
            tables[table] = ds.dataset(table_paths([run_dir], table)[0], schema=SCHEMAS[table]).to_table(
                columns=list(columns), filter=where)
        if tables["reads"].column("seq").null_count:
            tables["reads"] = tables["reads"].drop_columns(["seq"])
        found = log_arrays.findings(tables["sends"], tables["reads"], tables["ends"])
        out.append((rid, found.__dict__))
    return out


def check(job) -> dict[str, dict]:
    """The log checker's Spark driver (checkers.spark.engine)."""
    from checkers import log_arrays
    from checkers.spark.session import ship_package

    tables = job.tables
    run_dirs, runs = list(tables.run_dirs), list(tables.runs)
    span = key_span(run_dirs)
    parts: dict[int, list] = {rid: [] for rid in range(len(runs))}
    if span is not None:
        context = tables.spark.sparkContext
        tasks = max(1, min(context.defaultParallelism, -(-tables.rows // ROWS_PER_TASK)))
        cut = ranges(span, tasks)
        ship_package(context)
        answers = (context.parallelize(list(enumerate(cut)), len(cut))
                   .flatMap(lambda task: [(task[0], rid, found) for rid, found in
                                          range_findings(run_dirs, runs, *task[1])])
                   .collect())
        for _task, rid, found in sorted(answers, key=lambda a: a[0]):
            parts[rid].append(log_arrays.Findings(**found))
    out = {run: log_arrays.merge(parts[rid]).result() for rid, run in enumerate(runs)}
    _absent(tables, out)
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

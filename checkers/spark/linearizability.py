"""The `linearizability` store checker's Spark driver: keys spread over the executors.

Same calls, search and result as `checkers.linearizability` (whose
`key_calls` and `check_key` run here, in the Python workers): the sends,
reads and ends tables of every run are unioned into one narrow frame,
grouped by k (run, key), and each group is handed to the search as one Arrow
table (`applyInArrow`: columnar hand-off, no pickled rows). Only one JSON
text per key comes back to the driver.

Keys whose calls are in plain real-time order and legal
(`checkers.spark.sequential`) are decided in the JVM and never shipped: only
their count, calls and configs per run come back. They are most keys of a
quiet run and every key of the bench's sequential history.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.linearizability import check_key, result, time_limit_default
from checkers.spark.sequential import settled_keys
from checkers.spark.tables import Tables, key_in_run, run_id

SEND, READ, END = 0, 1, 2
OUT_SCHEMA = "k bigint, found string"


def _rows(tables: Tables, only: set[int]) -> DataFrame:
    """k, kind, value, offset, type, process, a (invocation), b (completion) of every call
    row of the keys `only`.

    Every read goes: the first search is the whole one, so an invalid key's counterexample
    shows whole polls without a second search. Until 2026-11-29 the reads no step can fail
    stayed in the JVM (a join with the acknowledgements) and invalid keys were searched
    again with every read; the join cost more than the rows it saved (docs/performance.md,
    "Linearizability of a 10M-op history")."""
    none = F.lit(None)
    sends = tables._keyed("sends", only).select(
        "k", F.lit(SEND).alias("kind"), "value", "offset", "type", "process",
        F.col("invoke_index").alias("a"), F.col("complete_index").alias("b"))
    reads = tables._keyed("reads", only).select(
        "k", F.lit(READ).alias("kind"), "value", "offset", none.cast("string").alias("type"),
        "process", F.col("invoke_index").alias("a"), F.col("index").alias("b"))
    ends = tables._keyed("ends", only).select(
        "k", F.lit(END).alias("kind"), none.cast("string").alias("value"),
        F.col("end_offset").alias("offset"), none.cast("string").alias("type"),
        none.cast("string").alias("process"), F.col("invoke_index").alias("a"),
        F.col("complete_index").alias("b"))
    return sends.unionByName(reads).unionByName(ends)


def _searcher(deadline_epoch: float):
    def search(group: pa.Table) -> pa.Table:
        k = group.column("k")[0].as_py()
        kind = group.column("kind").to_numpy()
        sends, reads = np.flatnonzero(kind == SEND), np.flatnonzero(kind == READ)
        ends = np.flatnonzero(kind == END)
        end = None
        if len(ends):
            row = group.slice(int(ends[-1]), 1).to_pylist()[0]
            end = (row["offset"], row["a"], row["b"])
        s, r = group.take(sends), group.take(reads)
        # the columns go to the search's fast path (checkers.linear.log_columns); the row
        # lists are built only for a key it leaves to the whole search
        columns = (s.column("value"), s.column("offset"), s.column("type"), s.column("a"),
                   s.column("b"), r.column("offset"), r.column("value"), r.column("b"),
                   r.column("a"))
        found = check_key(key_in_run(k), lambda: _send_rows(s), lambda: _read_rows(r), end,
                          deadline_epoch, columns=columns)
        return pa.table({"k": [k], "found": [json.dumps(found, default=str)]})
    return search


def _send_rows(table: pa.Table) -> list[tuple]:
    c = table.to_pydict()
    return list(zip(c["value"], c["offset"], c["type"], c["process"], c["a"], c["b"]))


def _read_rows(table: pa.Table) -> list[tuple]:
    c = table.to_pydict()
    return list(zip(c["offset"], c["value"], c["process"], c["b"], c["a"]))


COLUMNS = ("k", "kind", "value", "offset", "type", "process", "a", "b")


def _search_rows(search, item) -> tuple[int, str]:
    """The RDD path: one key's rows (tuples in COLUMNS order) through the same search."""
    k, rows = item
    table = pa.table({name: list(column) for name, column in zip(COLUMNS, zip(*rows))})
    out = search(table)
    return k, out.column("found")[0].as_py()


def _search(rows: DataFrame, search, width: int = 8) -> list:
    """Rows of the keys to search -> [{k, found}], one per key."""
    try:
        import pandas  # noqa: F401 - applyInArrow checks for it
    except ImportError:  # a venv set up before pandas was a dependency: rows as pickles
        return [{"k": k, "found": found}
                for k, found in rows.rdd.map(lambda row: (row["k"], tuple(row)))
                .groupByKey().map(lambda item: _search_rows(search, item)).collect()]
    return rows.repartition(width, "k").mapInArrow(_per_key(search), OUT_SCHEMA).collect()


def _per_key(search):
    """A partition's Arrow batches -> the search's answer for each of its keys.

    The rows of a key are put together here, by a stable numpy sort of the partition's
    k column, not by Spark's groupBy(k).applyInArrow: that sorted every shipped row in
    the JVM and cut Arrow batches per group, 33 of the search job's 46 JVM CPU-s on a
    10M-op history of concurrent keys (docs/performance.md)."""
    def per_partition(batches):
        batches = list(batches)
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        if table.num_rows == 0:
            return
        k = table.column("k").to_numpy()
        order = np.argsort(k, kind="stable")
        table, k = table.take(order), k[order]
        starts = np.concatenate(([0], np.flatnonzero(np.diff(k)) + 1, [len(k)]))
        for start, stop in zip(starts[:-1], starts[1:]):
            yield from search(table.slice(int(start), int(stop - start))).to_batches()
    return per_partition


def settle(tables: Tables, order: list | None = None
           ) -> tuple[dict[str, tuple[int, int, int]], set[int]]:
    """Decide the keys in plain real-time order in the JVM: -> ({run: (keys, calls,
    configs) of the settled keys}, k of the keys left to search). order: the collected
    rows of `settled_keys`, else one job collects them (one row per key: a campaign of
    100 runs of 1000 keys is 100,000 small rows)."""
    summary: dict[str, list[int]] = {}
    searched = set()
    for row in order if order is not None else settled_keys(tables).collect():
        if not row["sequential"]:
            searched.add(row["k"])
            continue
        entry = summary.setdefault(tables.runs[run_id(row["k"])], [0, 0, 0])
        entry[0] += 1
        entry[1] += row["calls"]
        entry[2] += row["calls"] + 1 if row["calls"] > 0 else 0
    return {run: tuple(entry) for run, entry in summary.items()}, searched


SETTLED = True  # check() uses job.settled() (checkers.spark.engine)


def check(job) -> dict[str, dict]:
    """The linearizability checker's Spark driver (checkers.spark.engine)."""
    return check_runs(job.tables, job.time_limit, job.settled())


def check_runs(tables: Tables, time_limit: float | None = None,
               order: tuple[list, float] | None = None) -> dict[str, dict]:
    """-> {run: linearizability result} for every run of `tables` (before tables.release()).
    order: the collected rows of `settled_keys` and the seconds they took, if the caller
    has them (they count in the result's time)."""
    from checkers.spark.session import ship_package

    started = time.monotonic() - (order[1] if order else 0.0)
    summary, searched = settle(tables, order[0] if order else None)
    limit = time_limit_default() if time_limit is None else time_limit
    ship_package(tables.spark.sparkContext)
    # The limit is each run's, as in the local engine: a job of many runs (a campaign's final
    # check) has their sum. One shared 120 s for 20 runs of a loaded campaign left 16 of them
    # unknown (2026-11-28, false-alarms-kafka-membership at load 25) that each run's own check
    # had decided valid.
    search = _searcher(time.time() + limit * max(1, len(tables.runs)))
    rows = _search(_rows(tables, searched), search, tables.width) if searched else []
    found = {row["k"]: json.loads(row["found"]) for row in rows}
    per_run: dict[str, list] = {run: [] for run in tables.runs}
    for k, verdict in found.items():
        per_run[tables.runs[run_id(k)]].append((key_in_run(k), verdict))
    seconds = time.monotonic() - started
    return {run: result(per_key, "spark", seconds, limit, summary.get(run, (0, 0, 0)))
            for run, per_key in per_run.items()}

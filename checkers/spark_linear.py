"""The linearizability checker on Spark: keys spread over the executors.

Same calls, search and result as `checkers.linearizability` (whose
`key_calls` and `check_key` run here, in the Python workers): the sends,
reads and ends tables of every run are unioned into one narrow frame,
grouped by k (run, key), and each group is handed to the search as one Arrow
table (`applyInArrow`: columnar hand-off, no pickled rows). Only one JSON
text per key comes back to the driver.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.linearizability import check_key, result, time_limit_default
from checkers.spark_tables import KEY_BITS, KEY_LIMIT, Tables, key_in_run, run_of

SEND, READ, END = 0, 1, 2
OUT_SCHEMA = "k bigint, found string"


def _rows(tables: Tables) -> DataFrame:
    """k, kind, value, offset, type, process, a (invocation), b (completion) of every call row."""
    none = F.lit(None)
    sends = tables._keyed("sends").select(
        "k", F.lit(SEND).alias("kind"), "value", "offset", "type", "process",
        F.col("invoke_index").alias("a"), F.col("complete_index").alias("b"))
    reads = tables._keyed("reads").select(
        "k", F.lit(READ).alias("kind"), "value", "offset", none.cast("string").alias("type"),
        "process", F.col("invoke_index").alias("a"), F.col("index").alias("b"))
    ends = tables._keyed("ends").select(
        "k", F.lit(END).alias("kind"), none.cast("string").alias("value"),
        F.col("end_offset").alias("offset"), none.cast("string").alias("type"),
        none.cast("string").alias("process"), F.col("invoke_index").alias("a"),
        F.col("complete_index").alias("b"))
    return sends.unionByName(reads).unionByName(ends)


def _searcher(deadline_epoch: float):
    def search(group: pa.Table) -> pa.Table:
        columns = group.to_pydict()
        k = columns["k"][0]
        sends, reads, end = [], [], None
        for kind, value, offset, typ, process, a, b in zip(
                columns["kind"], columns["value"], columns["offset"], columns["type"],
                columns["process"], columns["a"], columns["b"]):
            if kind == SEND:
                sends.append((value, offset, typ, process, a, b))
            elif kind == READ:
                reads.append((offset, value, process, b, a))
            else:
                end = (offset, a, b)
        found = check_key(key_in_run(k), sends, reads, end, deadline_epoch)
        return pa.table({"k": [k], "found": [json.dumps(found, default=str)]})
    return search


COLUMNS = ("k", "kind", "value", "offset", "type", "process", "a", "b")


def _search_rows(search, item) -> tuple[int, str]:
    """The RDD path: one key's rows (tuples in COLUMNS order) through the same search."""
    k, rows = item
    table = pa.table({name: list(column) for name, column in zip(COLUMNS, zip(*rows))})
    return k, search(table).column("found")[0].as_py()


def run_of_k(k: int) -> int:
    return (k + KEY_LIMIT) >> KEY_BITS


def check_runs(tables: Tables, time_limit: float | None = None) -> dict[str, dict]:
    """-> {run: linearizability result} for every run of `tables`."""
    from checkers.linear.spark import _ship_package

    started = time.monotonic()
    limit = time_limit_default() if time_limit is None else time_limit
    _ship_package(tables.spark.sparkContext)
    search = _searcher(time.time() + limit)
    try:
        import pandas  # noqa: F401 - applyInArrow checks for it
    except ImportError:  # a venv set up before pandas was a dependency: rows as pickles
        found = [{"rid": run_of_k(k), "k": k, "found": found}
                 for k, found in _rows(tables).rdd.map(lambda row: (row["k"], tuple(row)))
                 .groupByKey().map(lambda item: _search_rows(search, item)).collect()]
    else:
        found = (_rows(tables).groupBy("k").applyInArrow(search, OUT_SCHEMA)
                 .select(run_of(F.col("k")).alias("rid"), "k", "found").collect())
    per_run: dict[str, list] = {run: [] for run in tables.runs}
    for row in found:
        per_run[tables.runs[row["rid"]]].append((key_in_run(row["k"]), json.loads(row["found"])))
    seconds = time.monotonic() - started
    return {run: result(per_key, "spark", seconds, limit) for run, per_key in per_run.items()}

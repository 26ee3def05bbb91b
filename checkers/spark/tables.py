"""The inputs of a Spark check: the runs' Parquet tables, and the keys they hold.

The per-key checkers (log, replica diff, linearizability) read their rows themselves, in
the key pass's Python tasks (`checkers.spark.key_pass`); what is left here is what the
driver and the DataFrame checkers (transactions) read:

- `k` = run id * 2^32 + key names a (run, key) in one bigint, so sorts get a
  useful 64-bit prefix and no string is hashed per row. Keys are Kafka
  partition numbers (int32; others fail loudly).
- A value is named by (vid, vtext): a canonical integer text ("42", the
  harness workload's values) is the integer itself (exact); any other JSON
  text is its 64-bit xxhash (vtext true). Aggregations compare ids, never
  strings, so they stay hash aggregations. Two different non-integer texts of
  one key would have to collide in 64 bits to be confused.
"""

from __future__ import annotations

import functools
import threading

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from history.parquet import SCHEMAS, table_paths
from checkers.spark.schema import spark_schema

KEY_BITS = 32
KEY_SPAN = 1 << KEY_BITS
KEY_LIMIT = 1 << (KEY_BITS - 1)
# Rows per partition of the input tables: ~30 partitions for a 10M-op run,
# small enough for every task's sort and hash buffers in a 2 GiB driver.
ROWS_PER_PARTITION = 2_000_000
# Up to this many input rows, a value's canonical length is its integer's own text's length
# (`value_id(by_text=True)`): the arithmetic form's eighteen comparisons are some
# hundred py4j calls to build and a large tree to plan in every read of a table, which a
# small check pays and never earns back. Tiny stores (tests/data/stores, two, 10 warm checks
# each, alternated in one session, 2026-11-29): median 7.4 -> 6.0 JVM CPU-s and 1.81 -> 1.18
# Python CPU-s a check, the same verdicts.
TEXT_LENGTH_ROWS = 200_000


def input_rows(run_dirs: list[str]) -> int:
    """Rows of all input tables, from Parquet footers (no data read)."""
    return sum(pq.ParquetFile(path).metadata.num_rows
               for table in ("sends", "reads", "records") for path in table_paths(run_dirs, table))


def read_table(spark: SparkSession, run_dirs: list[str], table: str) -> DataFrame:
    return spark.read.schema(spark_schema(SCHEMAS[table])).parquet(*table_paths(run_dirs, table))


def run_of(k):
    """Run id of a k (keys may be negative: k - run * 2^32 lies in [-2^31, 2^31))."""
    return F.shiftright(k + KEY_LIMIT, KEY_BITS)


def run_id(k: int) -> int:
    """The run id of a k, in Python."""
    return (k + KEY_LIMIT) >> KEY_BITS


def key_in_run(k: int) -> int:
    """The key of a k, in Python."""
    return k - run_id(k) * KEY_SPAN


def _built_once(method):
    """A property computed on first use, once even when drivers' threads ask at once."""
    @functools.wraps(method)
    def get(self):
        with self._building:
            if method.__name__ not in self.__dict__:
                self.__dict__[method.__name__] = method(self)
            return self.__dict__[method.__name__]
    return property(get)


class Tables:
    """The inputs of one check of many runs."""

    def __init__(self, spark: SparkSession, run_dirs: list[str], runs: list[str],
                 partitions: int | None = None, rows: int | None = None) -> None:
        self.spark = spark
        self.run_dirs = run_dirs
        self.runs = runs
        self.ids = spark.createDataFrame(list(enumerate(runs)), "rid bigint, run string")
        self._building = threading.RLock()  # drivers ask for the facts from their own threads
        self.rows = rows if rows is not None else input_rows(run_dirs)
        self.width = partitions or max(int(spark.conf.get("spark.sql.shuffle.partitions")),
                                       -(-self.rows // ROWS_PER_PARTITION))
        self.ends = self._keyed("ends").select("k", "end_offset", "invoke_index",
                                               "complete_index", "absent").cache()

    def keys_in(self, names) -> set[int]:
        """k of every key of these tables (pyarrow, each table's keys read once per check)."""
        found = set()
        for name in names:
            found |= self._table_keys(name)
        return found

    def _table_keys(self, name: str) -> set[int]:
        with self._building:
            cache = self.__dict__.setdefault("_keys_of", {})
            if name not in cache:
                cache[name] = set()
                for rid, (run_dir, run) in enumerate(zip(self.run_dirs, self.runs)):
                    keys = pc.unique(ds.dataset(table_paths([run_dir], name)[0], schema=SCHEMAS[name]).to_table(
                        columns=["key"], filter=pc.field("run") == run)["key"]).to_numpy()
                    wide = keys[(keys >= KEY_LIMIT) | (keys < -KEY_LIMIT)]
                    if len(wide):
                        raise ValueError(f"key out of int32 range: {wide[0]} ({name} of run {run})")
                    cache[name].update((keys + rid * KEY_SPAN).tolist())
            return cache[name]

    def release(self) -> None:
        self.ends.unpersist()

    # -- raw inputs (Parquet) with k and the value id --------------------------------

    def _keyed(self, table: str, only: set[int] | None = None) -> DataFrame:
        """A Parquet table with `k` in place of (run, key); keys outside int32 fail loudly.

        only: keep just these k (filtered on the Parquet key column first, so
        lookups of a few examples skip parsing every other row).
        """
        frame = read_table(self.spark, self.run_dirs, table)
        if only is not None:
            frame = frame.where(F.col("key").isin(sorted({key_in_run(k) for k in only})))
        if len(self.runs) == 1:  # a filter, not a join probe per row: ~1 CPU-s per 15M rows
            frame = frame.where(F.col("run") == self.runs[0]).withColumn(
                "rid", F.lit(0).cast("bigint"))
        else:
            frame = frame.join(F.broadcast(self.ids), "run")
        frame = frame.withColumn("k", self._k)
        return frame.where(F.col("k").isin(sorted(only))) if only is not None else frame

    # The derived columns, built once per check and reused by every read of a table: each
    # is tens of py4j calls to build, and a small check reads its tables some thirty times.
    @_built_once
    def _k(self):
        key = F.col("key")
        checked = F.when((key >= KEY_LIMIT) | (key < -KEY_LIMIT),
                         F.raise_error(F.concat(F.lit("key out of int32 range: "),
                                                key.cast("string")))).otherwise(key)
        return F.col("rid") * KEY_SPAN + checked

    @_built_once
    def _value_id(self):
        return value_id(by_text=self.rows <= TEXT_LENGTH_ROWS)

    def raw(self, table: str, only: set[int] | None = None) -> DataFrame:
        """A Parquet input table with k, vid and vtext (the value text kept for lookups)."""
        frame = self._keyed(table, only)
        if "value" not in SCHEMAS[table].names:   # (the schema at hand: no plan to analyse)
            return frame
        vtext, vid = self._value_id
        return frame.withColumn("vtext", vtext).withColumn("vid", vid)


def value_id(by_text: bool = False):
    """(vtext, vid) columns of `value` (see the module's docstring). by_text: compare with
    the length of the integer's own text, a small input's cheaper form (TEXT_LENGTH_ROWS);
    both give the same ids."""
    number = F.col("value").try_cast("bigint")
    length = F.length(number.cast("string")) if by_text else _canonical_length(number)
    exact = F.coalesce(F.length("value") == length, F.lit(False))
    return ~exact, F.when(exact, number).otherwise(F.xxhash64("value"))


def _canonical_length(number):
    """Characters of a bigint's canonical text, counted without writing it.

    A text that parses to n is n's canonical text iff it is as long: anything
    else that parses (a sign '+', spaces, leading zeros, a fraction) adds
    characters. Comparing lengths instead of `number.cast("string") == value`
    saves a string per row: a third of the cost of reading the 15M records of a
    10M-op run (2.2 vs 3.2 CPU-s, measured).
    """
    length = F.lit(1) + (number < 0).cast("int")
    for power in range(1, 19):
        length = length + ((number >= 10 ** power) | (number <= -10 ** power)).cast("int")
    return length

"""The tables the Spark drivers read in the JVM (the replica diff, the settle job, transactions):
narrow rows with one bigint key, partitioned once.

Why this shape: every anomaly is per key, so all input rows are
hash-partitioned once by key and every later aggregation and window (grouped
by key and more) runs without another shuffle. What makes 10M-op runs fit in
two cores is keeping those rows narrow and fixed-width:

- `k` = run id * 2^32 + key names a (run, key) in one bigint, so sorts get a
  useful 64-bit prefix and no string is hashed per row. Keys are Kafka
  partition numbers (int32).
- A value is named by (vid, vtext): a canonical integer text ("42", the
  harness workload's values) is the integer itself (exact); any other JSON
  text is its 64-bit xxhash (vtext true). Aggregations compare ids, never
  strings, so they stay hash aggregations. Two different non-integer texts of
  one key would have to collide in 64 bits to be confused.
- Texts come back only for the few rows that reach an example
  (`value_text`), from a (k, vid) -> text table that exists only when some
  value is not an integer.

Tables (`Tables`): sends S, reads R, records D (narrow, partitioned by k, not
cached: each is shuffled again where a window needs it, which measured
cheaper than caching 30M rows); triples T (one row per (k, offset, value),
cached), from T the per-offset facts O and per-value facts V, and from O the
per-key facts K (all cached).
"""

from __future__ import annotations

import functools
import threading

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from history.flatten import PAST_MARK
from history.parquet import SCHEMAS, table_paths
from checkers.spark.schema import spark_schema

KEY_BITS = 32
KEY_SPAN = 1 << KEY_BITS
KEY_LIMIT = 1 << (KEY_BITS - 1)
# Rows per partition of the input tables: ~30 partitions for a 10M-op run,
# small enough for every task's sort and hash buffers in a 2 GiB driver.
ROWS_PER_PARTITION = 2_000_000
CACHE_LEVEL = StorageLevel.MEMORY_AND_DISK
# Suspect streams are broadcast to filter the reads before the shuffle; past
# this many, every stream is walked (a run that broken needs no shortcut).
SUSPECT_STREAMS_LIMIT = 100_000
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


def k_of(rid: int, key: int) -> int:
    """The k of a run id and key, in Python (for lookups of collected examples)."""
    return rid * KEY_SPAN + key


def run_id(k: int) -> int:
    """The run id of a k, in Python."""
    return (k + KEY_LIMIT) >> KEY_BITS


def key_in_run(k: int) -> int:
    """The key of a k, in Python."""
    return k - run_id(k) * KEY_SPAN


def key_of(k):
    return k - run_of(k) * KEY_SPAN


def value_text(vid: str = "vid", vtext: str = "vtext", text: str = "text"):
    """The canonical JSON text of a value id: the integer itself, else the looked-up text."""
    return F.when(~F.col(vtext), F.col(vid).cast("string")).otherwise(F.col(text))


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
    """The inputs of one check of many runs, and their cached per-key facts."""

    def __init__(self, spark: SparkSession, run_dirs: list[str], runs: list[str],
                 partitions: int | None = None, rows: int | None = None) -> None:
        self.spark = spark
        self.run_dirs = run_dirs
        self.runs = runs
        self.rids = {run: rid for rid, run in enumerate(runs)}
        self.ids = spark.createDataFrame(list(enumerate(runs)), "rid bigint, run string")
        self._building = threading.RLock()  # drivers ask for the facts from their own threads
        self.rows = rows if rows is not None else input_rows(run_dirs)
        self.width = partitions or max(int(spark.conf.get("spark.sql.shuffle.partitions")),
                                       -(-self.rows // ROWS_PER_PARTITION))
        # Past copies (checkers.replica_diff) give their committed records to divergence
        # only: `every_replica` keeps their HWs, `replicas` is the final state.
        self.every_replica = self._keyed("replicas").select(
            "k", "node", "hw", "log_start", F.col("node").contains(PAST_MARK).alias("past")).cache()
        self.replicas = self.every_replica.where(~F.col("past")).drop("past")
        self.ends = self._keyed("ends").select("k", "end_offset", "invoke_index",
                                               "complete_index", "absent").cache()
        self._cached: list[DataFrame] = [self.every_replica, self.ends]

    # -- the replica diff's and the settle job's facts, built (and cached) on first use: a
    # check of transactions
    # only reads the raw tables, and building these took about half of its JVM CPU
    # (bench/txn_check.py, 100k transactions: 41 CPU-s warm with them, see docs/performance.md).

    @_built_once
    def triples(self) -> DataFrame:
        return self._cache(_triples(self.sends(), self.reads(), self.records()))

    @_built_once
    def _per_key(self) -> list:
        """One scan of T, a row per key: any text value, and keys acknowledged to (a run
        with one that the final phase did not read to its end is unfinished)."""
        return self.triples.groupBy("k").agg(
            F.max(F.col("vtext").cast("byte")).alias("text"),
            F.max(F.col("ack_index").isNotNull().cast("byte")).alias("acked")).collect()

    @_built_once
    def has_text(self) -> bool:
        return any(row["text"] for row in self._per_key)

    @_built_once
    def ended(self) -> set[int]:
        """k of every key with an end row (the final phase's read of its end)."""
        return {row["k"] for row in self.ends.select("k").collect()}

    @_built_once
    def call_keys(self) -> set[int]:
        """k of every key of the sends, reads and ends: the keys the linearizability checker
        decides (`checkers.spark.sequential` gives each a row).

        Read with pyarrow from the key columns, not by a Spark job: a check whose Spark
        drivers need no triples T (the log checker and the search run in Python tasks, and
        without dumps the replica diff has nothing to do) then never builds them (~40 JVM
        CPU-s at 10M ops)."""
        return self.keys_in(("sends", "reads", "ends"))

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
                    keys = ds.dataset(table_paths([run_dir], name)[0], schema=SCHEMAS[name]).to_table(
                        columns=["key"], filter=pc.field("run") == run)["key"]
                    cache[name].update((pc.unique(keys).to_numpy() + rid * KEY_SPAN).tolist())
            return cache[name]

    @_built_once
    def has_dumps(self) -> bool:
        """Whether any run of the check has records or replica rows (Parquet footers): without
        them the replica diff finds nothing, and builds none of the facts."""
        return any(pq.ParquetFile(path).metadata.num_rows
                   for table in ("records", "replicas") for path in table_paths(self.run_dirs, table))

    @_built_once
    def unfinished(self) -> set[str]:
        return {self.runs[run_id(row["k"])] for row in self._per_key
                if row["acked"] and row["k"] not in self.ended}

    @_built_once
    def dumped(self) -> set[str]:
        return {self.runs[row["rid"]] for row in
                self.replicas.select(run_of(F.col("k")).alias("rid")).distinct().collect()}

    @_built_once
    def offsets(self) -> DataFrame:
        return self._cache(_offset_facts(self.triples))

    @_built_once
    def values(self) -> DataFrame:
        return self._cache(_value_facts(self.triples))

    @_built_once
    def keys(self) -> DataFrame:
        return self._cache(_key_facts(self.offsets, self.replicas))

    def _cache(self, frame: DataFrame) -> DataFrame:
        frame = frame.persist(CACHE_LEVEL)
        frame.count()
        self._cached.append(frame)
        return frame

    def release(self) -> None:
        for frame in self._cached:
            frame.unpersist()

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

    def _partitioned(self, frame: DataFrame) -> DataFrame:
        return frame.repartition(self.width, "k")

    def sends(self, keys: DataFrame | None = None) -> DataFrame:
        """S: k, offset, vid, vtext, type (0 ok, 1 fail, 2 info), process, invoke/complete index.

        keys: keep only these k (broadcast, before the shuffle).
        """
        kind = F.col("type")
        code = F.when(kind == "ok", 0).when(kind == "fail", 1).otherwise(2).cast("byte")
        raw = self.raw("sends")
        if keys is not None:
            raw = raw.join(F.broadcast(keys.select("k")), "k")
        return self._partitioned(raw.select(
            "k", "offset", "vid", "vtext", code.alias("type"), "process", "invoke_index",
            "complete_index"))

    def acks(self, keys: DataFrame | None = None) -> DataFrame:
        """Ok sends with an offset: the acknowledged (offset, value) pairs (of `keys` only)."""
        return self.sends(keys).where((F.col("type") == 0) & F.col("offset").isNotNull())

    def reads(self, streams: DataFrame | None = None) -> DataFrame:
        """R: k, offset, vid, vtext, process, index, pos, session, final.

        streams: keep only these (k, session) streams (broadcast, before the shuffle).
        """
        raw = self.raw("reads")
        if streams is not None:
            raw = raw.join(F.broadcast(streams), ["k", "session"])
        return self._partitioned(raw.select(
            "k", "offset", "vid", "vtext", "process", "index", "pos", "session", "final"))

    def records(self) -> DataFrame:
        """D: k, offset, vid, vtext, epoch, committed (offset below its replica's HW), held
        (by a final replica, not only by a past copy)."""
        hws = F.broadcast(self.every_replica.select("k", "node", "hw", "past"))
        return self._partitioned(self.raw("records").join(hws, ["k", "node"], "left").select(
            "k", "offset", "vid", "vtext", "epoch",
            F.coalesce(F.col("offset") < F.col("hw"), F.lit(False)).alias("committed"),
            (~F.coalesce(F.col("past"), F.lit(False))).alias("held")))

    @_built_once
    def suspect_streams(self) -> DataFrame | None:
        """(k, session) read streams that are not one run of consecutive offsets, or None for
        all (more than SUSPECT_STREAMS_LIMIT). Computed once: the poll-order check walks only
        these, and the linearizability shortcut skips their keys.

        A stream whose offset - seq is constant reads consecutive offsets in
        order: every pair has delta 1 and nothing to report. One aggregation
        (combined map-side) finds the rest, usually none.
        """
        drift = F.col("offset") - F.col("seq")
        suspects = (self.raw("reads").groupBy("k", "session")
                    .agg(F.min(drift).alias("lo"), F.max(drift).alias("hi"))
                    .where(F.col("lo") != F.col("hi")).select("k", "session")
                    .limit(SUSPECT_STREAMS_LIMIT + 1).collect())
        if len(suspects) > SUSPECT_STREAMS_LIMIT:
            return None
        return self.spark.createDataFrame(suspects, "k bigint, session bigint")

    @_built_once
    def texts(self) -> DataFrame | None:
        """(k, vid, vtext) -> text of every non-integer value (cached), or None when all are
        integers (then no input is scanned for texts)."""
        if not self.has_text:
            return None
        rows = [self.raw(t).where(F.col("vtext")).select("k", "vid", "value")
                for t in ("sends", "reads", "records")]
        return self._cache(rows[0].unionByName(rows[1]).unionByName(rows[2])
                           .groupBy("k", "vid").agg(F.min("value").alias("text"))
                           .withColumn("vtext", F.lit(True)))

    def with_text(self, frame: DataFrame, vid: str = "vid", vtext: str = "vtext",
                  out: str = "value") -> DataFrame:
        """Add the value text of (vid, vtext) as column `out` (a join only if texts exist)."""
        texts = self.texts
        if texts is None:
            return frame.withColumn(out, F.col(vid).cast("string"))
        lookup = texts.select("k", F.col("vid").alias(vid), F.col("vtext").alias(vtext),
                              F.col("text").alias("_text"))
        return (frame.join(lookup, ["k", vid, vtext], "left")
                .withColumn(out, value_text(vid, vtext, "_text")).drop("_text"))


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


VALUE = ["k", "offset", "vid", "vtext"]
OBS, RD, FIN, HELD, PAST = 1, 2, 4, 8, 16  # bits of a triple's yes/no facts


def _triples(sends: DataFrame, reads: DataFrame, records: DataFrame) -> DataFrame:
    """T: per (k, offset, value), what clients and replicas did with it.

    obs: observed (acknowledged or read); rd: read; fin: read by a final
    poll; read_index: first poll reading it; ack_index / fail_index: the ok /
    failed send's completion; held: some replica holds it; c_lo / c_hi:
    epochs of the final replicas' committed copies; h_lo / h_hi: epochs of every final
    copy (the replica diff's differences); past: a past copy commits it
    (checkers.replica_diff, overwritten). One hash aggregation over all 30M input rows;
    O and V derive from its ~5M rows. Sends without an outcome that matters
    (info) are left out. The four yes/no facts travel as bits of one byte
    (one bit_or instead of four max buffers: ~6% of this aggregation, measured).
    The fifth, past, marks committed copies that only past copies hold.
    """
    none = F.lit(None).cast("bigint")
    ok = (F.col("type") == 0) & F.col("offset").isNotNull()
    fail = F.col("type") == 1

    def part(frame, bits, read_index, ack_index, fail_index, epoch, held_epoch=none):
        return frame.select(*VALUE, bits.cast("byte").alias("bits"),
                            read_index.alias("read_index"), ack_index.alias("ack_index"),
                            fail_index.alias("fail_index"), epoch.alias("epoch"),
                            held_epoch.alias("held_epoch"))

    read_bits = F.when(F.col("final"), OBS | RD | FIN).otherwise(OBS | RD)
    rows = (part(sends.where(ok | fail), F.when(ok, OBS).otherwise(0), none,
                 F.when(ok, F.col("complete_index")), F.when(fail, F.col("complete_index")),
                 none)
            .unionByName(part(reads, read_bits, F.col("index"), none, none, none))
            .unionByName(part(records, F.when(F.col("held"), HELD)
                              .otherwise(F.when(F.col("committed"), PAST).otherwise(0)), none, none, none,
                              F.when(F.col("committed") & F.col("held"), F.col("epoch")),
                              F.when(F.col("held"), F.col("epoch")))))
    bits = F.col("bits").cast("int")
    return rows.groupBy(*VALUE).agg(
        F.bit_or("bits").alias("bits"), F.min("read_index").alias("read_index"),
        F.max("ack_index").alias("ack_index"), F.max("fail_index").alias("fail_index"),
        F.min("epoch").alias("c_lo"), F.max("epoch").alias("c_hi"),
        F.min("held_epoch").alias("h_lo"), F.max("held_epoch").alias("h_hi")).select(
        *VALUE, *[(bits.bitwiseAND(flag) != 0).cast("byte").alias(name) for name, flag in
                  (("obs", OBS), ("rd", RD), ("fin", FIN), ("held", HELD), ("past", PAST))],
        "read_index", "ack_index", "fail_index", "c_lo", "c_hi", "h_lo", "h_hi")


def _distinct_values(where, prefix: str) -> list:
    """How many values of the offset the rows `where` holds: T has one row per distinct
    value of an offset, so counting its rows is counting values (two count buffers where
    min/max of (vtext, vid) took eight)."""
    return [F.count(F.when(where, F.lit(1))).alias(f"{prefix}_values")]


def differs(prefix: str):
    return F.col(f"{prefix}_values") > 1


def _offset_facts(triples: DataFrame) -> DataFrame:
    """O: per (k, offset): observed values, reads, committed copies, held; h_values,
    h_lo, h_hi: the values and epochs of its final copies (their (epoch, value) pairs
    differ iff h_values > 1 or h_lo != h_hi)."""
    obs = F.col("obs") == 1
    committed = F.col("c_lo").isNotNull()
    past_only = (F.col("past") == 1) & ~committed  # a past copy's committed value no final copy commits
    return (triples.where(F.col("offset").isNotNull()).groupBy("k", "offset").agg(
        F.max("obs").alias("obs"), F.max("rd").alias("rd"), F.max("fin").alias("fin"),
        F.min("read_index").alias("read_index"), F.max("held").alias("held"),
        F.min("c_lo").alias("c_lo"), F.max("c_hi").alias("c_hi"),
        *_distinct_values(obs, "obs"), *_distinct_values(committed, "c"),
        *_distinct_values(past_only, "p"),
        F.min("h_lo").alias("h_lo"), F.max("h_hi").alias("h_hi"),
        *_distinct_values(F.col("held") == 1, "h")))


def _key_facts(offsets: DataFrame, replicas: DataFrame) -> DataFrame:
    """K: per k, one scan of O: known offsets (lo, hi, count), the highest read offset,
    the committed range (low, high) over the dumped replicas and the offsets held in it.

    A few thousand rows that the checks broadcast: keys whose known offsets are
    contiguous need no ranks, keys holding their whole committed range no gap walk.
    """
    ranges = F.broadcast(replicas.groupBy("k").agg(
        F.min("log_start").alias("low"), F.max("hw").alias("high")))
    known = F.col("obs") == 1
    in_range = ((F.col("held") == 1) & (F.col("offset") >= F.col("low"))
                & (F.col("offset") < F.col("high")))
    per_key = offsets.join(ranges, "k", "left").groupBy("k").agg(
        F.min(F.when(known, F.col("offset"))).alias("known_lo"),
        F.max(F.when(known, F.col("offset"))).alias("known_hi"),
        F.count(F.when(known, F.lit(1))).alias("known"),
        F.max(F.when(F.col("rd") == 1, F.col("offset"))).alias("max_read_offset"),
        F.max(F.when(F.col("fin") == 1, F.col("offset"))).alias("max_final_offset"),
        F.count(F.when(in_range, F.lit(1))).alias("held_in_range"))
    # Keys dumped but never observed nor held still have a committed range to check.
    return per_key.join(ranges, "k", "full")


def _value_facts(triples: DataFrame) -> DataFrame:
    """V: per (k, value): offsets observed, read, acknowledgement, failure, held."""
    obs = F.col("obs") == 1
    return triples.groupBy("k", "vid", "vtext").agg(
        F.min(F.when(obs, F.col("offset"))).alias("min_offset"),
        F.max(F.when(obs, F.col("offset"))).alias("max_offset"),
        F.max("rd").alias("rd"), F.max("fin").alias("fin"),
        F.max(F.when(F.col("ack_index").isNotNull(), F.col("offset"))).alias("ack_offset"),
        F.max("ack_index").alias("ack_index"), F.max("fail_index").alias("fail_index"),
        F.max("held").alias("held"), F.min("read_index").alias("read_index"))

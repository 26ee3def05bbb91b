"""The one DataFrame both Spark checkers scan: sends, reads and replica records of many runs.

Why one table: every anomaly is per key, so partitioning all rows once by
(run, key) and caching them lets every later aggregation and window (grouped
by (run, key, ...)) run without another shuffle. With separate tables each
check would re-shuffle tens of millions of rows; on two cores that is the
whole time budget.

Columns: run, key, tag ("send" | "read" | "record"), value, offset, index
(send: completion index; read: the poll's index), invoke_index, type (send),
process, pos, session (read), node, epoch, committed (record: offset below its
replica's HW). Columns not meaningful for a tag are null.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import Window

from checkers.parquet import SCHEMAS, table_paths
from checkers.spark_schema import spark_schema

# Small partitions keep each task's sort, window and cache buffers well inside
# a 2 GiB driver heap (8 partitions of 30M rows ran out of memory).
ROWS_PER_PARTITION = 400_000
# Cached tables live on local disk, not in the heap: blocks cached in memory
# are shielded from eviction up to spark.memory.storageFraction, which left
# hash aggregations of a 10M-op run without memory in a 2 GiB driver.
CACHE_LEVEL = StorageLevel.DISK_ONLY
EVENT_COLUMNS = ("run", "key", "tag", "value", "offset", "index", "invoke_index", "type",
                 "process", "pos", "session", "node", "epoch", "committed")


def input_rows(run_dirs: list[str]) -> int:
    """Rows of all input tables, from Parquet footers (no data read)."""
    return sum(pq.ParquetFile(path).metadata.num_rows
               for table in ("sends", "reads", "records") for path in table_paths(run_dirs, table))


def read_table(spark: SparkSession, run_dirs: list[str], table: str) -> DataFrame:
    return spark.read.schema(spark_schema(SCHEMAS[table])).parquet(*table_paths(run_dirs, table))


def _with_nulls(df: DataFrame, present: dict) -> DataFrame:
    """Select EVENT_COLUMNS, taking `present` expressions and typed nulls elsewhere."""
    types = {"run": "string", "key": "bigint", "tag": "string", "value": "string",
             "offset": "bigint", "index": "bigint", "invoke_index": "bigint", "type": "string",
             "process": "string", "pos": "int", "session": "bigint", "node": "string",
             "epoch": "bigint", "committed": "boolean"}
    return df.select(*[
        (present[c] if c in present else F.lit(None)).cast(types[c]).alias(c)
        for c in EVENT_COLUMNS])


def build_events(spark: SparkSession, run_dirs: list[str], partitions: int | None = None):
    """-> (events, replicas): events cached and hash-partitioned by (run, key)."""
    sends = read_table(spark, run_dirs, "sends")
    reads = read_table(spark, run_dirs, "reads")
    records = read_table(spark, run_dirs, "records")
    replicas = read_table(spark, run_dirs, "replicas").cache()
    hws = F.broadcast(replicas.select("run", "node", "key", "hw"))
    send_events = _with_nulls(sends, {
        "run": F.col("run"), "key": F.col("key"), "tag": F.lit("send"), "value": F.col("value"),
        "offset": F.col("offset"), "index": F.col("complete_index"),
        "invoke_index": F.col("invoke_index"), "type": F.col("type"),
        "process": F.col("process")})
    read_events = _with_nulls(reads, {
        "run": F.col("run"), "key": F.col("key"), "tag": F.lit("read"), "value": F.col("value"),
        "offset": F.col("offset"), "index": F.col("index"), "process": F.col("process"),
        "pos": F.col("pos"), "session": F.col("session")})
    record_events = _with_nulls(records.join(hws, ["run", "node", "key"], "left"), {
        "run": F.col("run"), "key": F.col("key"), "tag": F.lit("record"),
        "value": F.col("value"), "offset": F.col("offset"), "node": F.col("node"),
        "epoch": F.col("epoch"),
        "committed": F.coalesce(F.col("offset") < F.col("hw"), F.lit(False))})
    width = partitions or max(int(spark.conf.get("spark.sql.shuffle.partitions")),
                              -(-input_rows(run_dirs) // ROWS_PER_PARTITION))
    events = (send_events.unionByName(read_events).unionByName(record_events)
              .repartition(width, "run", "key")
              .persist(CACHE_LEVEL))
    return events, replicas


def is_observation():
    """An (offset, value) seen by a client: an ok poll's pair or an ok send's acknowledgement."""
    return (F.col("tag") == "read") | (
        (F.col("tag") == "send") & (F.col("type") == "ok") & F.col("offset").isNotNull())


def value_facts(events: DataFrame) -> DataFrame:
    """Per (run, key, value): what clients and replicas did with it. Cached.

    One aggregation serves duplicate, aborted-read, lost-write, unseen and
    lost-acknowledged; grouping keys extend (run, key), so no shuffle.
    """
    obs = is_observation()
    ok_send = (F.col("tag") == "send") & (F.col("type") == "ok") & F.col("offset").isNotNull()
    return (events.groupBy("run", "key", "value").agg(
        F.min(F.when(obs, F.col("offset"))).alias("min_offset"),
        F.max(F.when(obs, F.col("offset"))).alias("max_offset"),
        F.max((F.col("tag") == "read").cast("int")).alias("read"),
        F.max(F.when(ok_send, F.col("offset"))).alias("ack_offset"),
        F.max(F.when(ok_send, F.col("index"))).alias("ack_index"),
        F.max(F.when((F.col("tag") == "send") & (F.col("type") == "fail"), F.col("index")))
        .alias("fail_index"),
        F.max((F.col("tag") == "record").cast("int")).alias("held"))
        .persist(CACHE_LEVEL))


def offset_facts(events: DataFrame) -> DataFrame:
    """Per (run, key, offset): the values clients saw and the records replicas hold. Cached."""
    obs = is_observation()
    committed = F.when(F.col("committed"), F.struct("epoch", "value"))
    return (events.where(F.col("offset").isNotNull()).groupBy("run", "key", "offset").agg(
        F.min(F.when(obs, F.col("value"))).alias("min_value"),
        F.max(F.when(obs, F.col("value"))).alias("max_value"),
        F.min(committed).alias("min_committed"),
        F.max(committed).alias("max_committed"),
        F.max((F.col("tag") == "record").cast("int")).alias("held"))
        .persist(CACHE_LEVEL))


SORT_COLUMNS = ("a", "b", "c", "d", "t")


def flag(df: DataFrame, kind, payload: list, order: dict, weight=None) -> DataFrame:
    """Anomaly rows in the common shape that all checks union into.

    kind: the anomaly name, or a Column choosing it per row (two kinds that
    come out of one computation, like poll-skip and nonmonotonic-poll).
    order: sort columns a, b, c, d (bigint) and t (string) -> expressions; the
    examples of a kind are its first rows by (a, b, c, d, t). payload: the
    columns the example is built from, carried as one JSON text. weight: what
    a row adds to the kind's count (default 1).
    """
    sort = [(order[c] if c in order else F.lit(None)).cast("string" if c == "t" else "bigint")
            .alias(c) for c in SORT_COLUMNS]
    kind = F.lit(kind) if isinstance(kind, str) else kind
    return df.select(F.col("run"), kind.alias("kind"),
                     (weight if weight is not None else F.lit(1)).cast("bigint").alias("weight"),
                     *sort, F.to_json(F.struct(*payload), {"ignoreNullFields": "false"}).alias("payload"))


def top_flags(flags: list[DataFrame], limit: int) -> dict[tuple[str, str], tuple[int, list[dict]]]:
    """One Spark job over all flag rows: (run, kind) -> (count, first `limit` payloads)."""
    union = flags[0]
    for more in flags[1:]:
        union = union.unionByName(more)
    group = Window.partitionBy("run", "kind")
    rows = (union.withColumn("_n", F.sum("weight").over(group))
            .withColumn("_rn", F.row_number().over(group.orderBy(*SORT_COLUMNS)))
            .where(F.col("_rn") <= limit).select("run", "kind", "_n", "_rn", "payload").collect())
    out: dict[tuple[str, str], tuple[int, list[dict]]] = {}
    for row in sorted(rows, key=lambda r: (r["run"], r["kind"], r["_rn"])):
        count, listed = out.setdefault((row["run"], row["kind"]), (row["_n"], []))
        listed.append(json.loads(row["payload"]))
    return out

"""The replica-log diff as Spark DataFrame jobs (no Python UDFs).

Same definitions, counts and examples as `checkers.replica_diff` (see its
docstring). Inputs are the cached aggregates of `checkers.spark_events`:

- divergence: `offset_facts` rows whose committed records' (epoch, value)
  minimum and maximum differ;
- missing-committed: held offsets inside each key's committed range, a
  sentinel row at the range's end, and lag over (run, key) by offset: every
  step larger than one is a gap (weighted by its length in the count);
- lost-acknowledged: `value_facts` rows acknowledged but held by no replica,
  at or above the key's lowest log start (broadcast join with the per-key
  ranges, a few thousand rows).

Like `checkers.spark_log`, `flags` returns rows in the common flag shape so
both checkers finish in one Spark job.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window
from pyspark.sql import functions as F

from checkers.flatten import decode_value
from checkers.replica_diff import ANOMALIES, MAX_OPS, summarize
from checkers.spark_events import flag

DUMPED = "_diff_dumped"  # pseudo-kind: one row per run that has any replica dump


def flags(values: DataFrame, offsets: DataFrame, replicas: DataFrame) -> list[DataFrame]:
    ranges = F.broadcast(replicas.groupBy("run", "key").agg(
        F.min("log_start").alias("low"), F.max("hw").alias("high")))
    return [
        flag(replicas.select("run").distinct(), DUMPED, [F.lit(1).alias("x")], {}),
        flag(offsets.where(F.col("min_committed") != F.col("max_committed")), "divergence",
             ["key", "offset"], {"a": F.col("key"), "b": F.col("offset")}),
        _missing_committed(offsets, ranges),
        _lost_acknowledged(values, ranges),
    ]


def _missing_committed(offsets, ranges):
    held = (offsets.where(F.col("held") == 1).select("run", "key", "offset")
            .join(ranges, ["run", "key"])
            .where((F.col("offset") >= F.col("low")) & (F.col("offset") < F.col("high"))))
    ends = ranges.select("run", "key", F.col("high").alias("offset"), "low", "high")
    by_offset = Window.partitionBy("run", "key").orderBy("offset")
    gaps = (held.unionByName(ends)
            .withColumn("first_offset",
                        F.coalesce(F.lag("offset").over(by_offset), F.col("low") - 1) + 1)
            .withColumn("last_offset", F.col("offset") - 1)
            .where(F.col("last_offset") >= F.col("first_offset")))
    return flag(gaps, "missing-committed", ["key", "first_offset", "last_offset"],
                {"a": F.col("key"), "b": F.col("first_offset")},
                weight=F.col("last_offset") - F.col("first_offset") + 1)


def _lost_acknowledged(values, ranges):
    lost = (values.where(F.col("ack_offset").isNotNull() & (F.col("held") == 0))
            .join(ranges, ["run", "key"])
            .where(F.col("ack_offset") >= F.col("low")))
    return flag(lost, "lost-acknowledged", ["key", "value", "ack_offset", "ack_index"],
                {"a": F.col("key"), "b": F.col("ack_offset"), "t": F.col("value")})


def results(spark: SparkSession, events: DataFrame, top: dict, runs: list[str],
            complete: dict[str, bool] | None = None) -> dict[str, dict]:
    """Collected flag rows -> run -> replica-diff result (identical to the in-process kernel)."""
    holders, writers = _divergence_details(spark, events, top)
    complete = complete or {}
    out = {}
    for run in runs:
        findings = {}
        for kind in ANOMALIES:
            count, payloads = top.get((run, kind), (0, []))
            findings[kind] = (count, [_example(kind, run, p, holders, writers) for p in payloads])
        out[run] = summarize(findings, has_dumps=(run, DUMPED) in top,
                             complete=complete.get(run, True))
    return out


def _example(kind, run, p, holders, writers):
    if kind == "missing-committed":
        return {"key": p["key"], "first_offset": p["first_offset"],
                "last_offset": p["last_offset"], "ops": []}
    if kind == "lost-acknowledged":
        return {"key": p["key"], "value": decode_value(p["value"]), "offset": p["ack_offset"],
                "ops": [p["ack_index"]]}
    held = holders[(run, p["key"], p["offset"])]
    ops = sorted({i for h in held for i in writers.get((run, p["key"], h[2]), ())})
    return {"key": p["key"], "offset": p["offset"],
            "replicas": [[node, epoch, decode_value(value)] for node, epoch, value in held],
            "ops": ops[:MAX_OPS]}


def _divergence_details(spark, events, top):
    """Committed holders of each listed divergent offset, and the sends of their values."""
    keys = [(run, p["key"], p["offset"]) for (run, kind), (_n, payloads) in top.items()
            if kind == "divergence" for p in payloads]
    if not keys:
        return {}, {}
    wanted = F.broadcast(spark.createDataFrame(keys, "run string, key bigint, offset bigint"))
    rows = (events.where((F.col("tag") == "record") & F.col("committed"))
            .join(wanted, ["run", "key", "offset"])
            .select("run", "key", "offset", "node", "epoch", "value").collect())
    holders: dict[tuple, list] = {}
    for r in rows:
        holders.setdefault((r["run"], r["key"], r["offset"]), []).append(
            (r["node"], r["epoch"], r["value"]))
    for held in holders.values():
        held.sort()
    values = spark.createDataFrame(sorted({(r["run"], r["key"], r["value"]) for r in rows}),
                                   "run string, key bigint, value string")
    writers: dict[tuple, set] = {}
    for w in (events.where((F.col("tag") == "send") & F.col("index").isNotNull())
              .join(F.broadcast(values), ["run", "key", "value"])
              .select("run", "key", "value", "index").collect()):
        writers.setdefault((w["run"], w["key"], w["value"]), set()).add(w["index"])
    return holders, writers

"""The log-anomaly checker as Spark DataFrame jobs (no Python UDFs).

Same definitions, counts and examples as `checkers.log_anomalies` (see its
docstring); a test holds the two to identical output. Every check is a
DataFrame expression over the events table of `checkers.spark_events`,
which is hash-partitioned by (run, key), so none of them shuffles again:

- set checks (duplicate, aborted-read, lost-write, unseen) read the per-value
  aggregate `value_facts`; inconsistent-offsets reads `offset_facts`;
- order checks are windows: dense_rank over (run, key) by offset gives each
  read its rank among known offsets, then lag over (run, key, session) by
  (index, pos) compares consecutive reads (poll-skip, nonmonotonic-poll);
  lag over (run, key, process) by completion index (nonmonotonic-send); a
  running max over (run, key) by history index (realtime-order).

`flags` returns the anomaly rows of every kind in one shape, so the caller
runs a single job for all kinds (job start-up dominates small runs on two
cores). Only counts and the first MAX_EXAMPLES rows per kind and run reach
the Python driver; the sorted value/index sets of those few examples come
from a broadcast join of the collected rows (`examples`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window
from pyspark.sql import functions as F

from checkers.flatten import decode_value
from checkers.log_anomalies import ANOMALIES, MAX_EXAMPLES, MAX_OPS, summarize
from checkers.spark_events import flag, is_observation

CHECKED = "_log_checked"  # pseudo-kind: one row per run that has any observation


def acked(events: DataFrame) -> DataFrame:
    return events.where((F.col("tag") == "send") & (F.col("type") == "ok")
                        & F.col("offset").isNotNull())


def flags(events: DataFrame, values: DataFrame, offsets: DataFrame) -> list[DataFrame]:
    obs = events.where(is_observation())
    rows = [
        flag(values.where(F.col("min_offset").isNotNull()).select("run").distinct(), CHECKED,
             [F.lit(1).alias("x")], {}),
        flag(offsets.where(F.col("min_value") != F.col("max_value")), "inconsistent-offsets",
             ["key", "offset"], {"a": F.col("key"), "b": F.col("offset")}),
        flag(values.where(F.col("min_offset") != F.col("max_offset")), "duplicate",
             ["key", "value"], {"a": F.col("key"), "t": F.col("value")}),
        flag(values.where(F.col("fail_index").isNotNull() & (F.col("read") == 1)), "aborted-read",
             ["key", "value", "fail_index"], {"a": F.col("key"), "t": F.col("value")}),
    ]
    rows += [_lost_and_unseen(events, values), _poll_order(obs), _nonmonotonic_sends(events),
             _realtime_order(events)]
    return rows


def _lost_and_unseen(events, values):
    """Unread acknowledged values, split by the key's highest read offset."""
    max_read = (events.where(F.col("tag") == "read").groupBy("run", "key")
                .agg(F.max(F.struct(F.col("offset"), (-F.col("index")).alias("neg_index")))
                     .alias("best"))
                .select("run", "key", F.col("best.offset").alias("max_read_offset"),
                        (-F.col("best.neg_index")).alias("max_read_index")))
    unread = (values.where(F.col("ack_offset").isNotNull() & (F.col("read") == 0))
              .join(F.broadcast(max_read), ["run", "key"], "left"))
    kind = F.when(F.col("ack_offset") <= F.col("max_read_offset"), "lost-write").otherwise("unseen")
    return flag(unread, kind,
                ["key", "value", "ack_offset", "ack_index", "max_read_offset", "max_read_index"],
                {"a": F.col("key"), "b": F.col("ack_offset"), "t": F.col("value")})


def _poll_order(obs):
    ranked = obs.withColumn(
        "rank", F.dense_rank().over(Window.partitionBy("run", "key").orderBy("offset")))
    stream = Window.partitionBy("run", "key", "session").orderBy("index", "pos")
    pairs = (ranked.where(F.col("tag") == "read")
             .withColumn("prev_rank", F.lag("rank").over(stream))
             .withColumn("prev_offset", F.lag("offset").over(stream))
             .withColumn("prev_index", F.lag("index").over(stream))
             .where(F.col("prev_rank").isNotNull())
             .withColumn("delta", F.col("rank") - F.col("prev_rank"))
             .where(F.col("delta") != 1))
    return flag(pairs, F.when(F.col("delta") > 1, "poll-skip").otherwise("nonmonotonic-poll"),
                ["key", "process", "prev_offset", "offset", "delta", "prev_index", "index"],
                {"a": F.col("key"), "b": F.col("index"), "c": F.col("pos"), "d": F.col("session")})


def _nonmonotonic_sends(events):
    stream = Window.partitionBy("run", "key", "process").orderBy("index")
    pairs = (acked(events).withColumn("prev_offset", F.lag("offset").over(stream))
             .withColumn("prev_index", F.lag("index").over(stream))
             .withColumn("prev_value", F.lag("value").over(stream))
             .where(F.col("offset") <= F.col("prev_offset")))
    return flag(pairs, "nonmonotonic-send",
                ["key", "process", "prev_offset", "offset", "prev_value", "value", "prev_index",
                 "index"], {"a": F.col("key"), "b": F.col("index")})


def _realtime_order(events):
    sends = acked(events)
    completions = sends.select("run", "key", "offset", "value", F.col("index").alias("at"),
                               F.lit(1).alias("is_completion"))
    invocations = sends.select("run", "key", "offset", "value",
                               F.col("invoke_index").alias("at"), F.lit(0).alias("is_completion"))
    so_far = (Window.partitionBy("run", "key").orderBy("at", "is_completion")
              .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    best = F.max(F.when(F.col("is_completion") == 1,
                        F.struct(F.col("offset").alias("o"), F.col("at").alias("i")))).over(so_far)
    late = (completions.unionByName(invocations).withColumn("best", best)
            .where((F.col("is_completion") == 0) & (F.col("best.o") > F.col("offset"))))
    return flag(late, "realtime-order",
                ["key", "value", "offset", F.col("best.o").alias("earlier_offset"),
                 F.col("best.i").alias("earlier_index"), "at"],
                {"a": F.col("key"), "b": F.col("at")})


def results(spark: SparkSession, events: DataFrame, top: dict, runs: list[str]) -> dict[str, dict]:
    """Collected flag rows -> run -> checker result (identical to the in-process kernel)."""
    details = _details(spark, events, top)
    out = {}
    for run in runs:
        findings = {}
        for kind in ANOMALIES:
            count, payloads = top.get((run, kind), (0, []))
            findings[kind] = (count, [_EXAMPLE[kind](p, details.get((run, kind), {}))
                                      for p in payloads])
        out[run] = summarize(findings, checked=(run, CHECKED) in top)
    return out


def _details(spark, events, top) -> dict:
    """(run, kind) -> {join key: Row of sorted sets} for kinds whose examples list sets."""
    specs = {
        "inconsistent-offsets": (["key", "offset"], events.where(is_observation()),
                                 [F.array_sort(F.collect_set("value")).alias("values"),
                                  F.slice(F.array_sort(F.collect_set("index")), 1, MAX_OPS)
                                  .alias("ops")]),
        "duplicate": (["key", "value"], events.where(is_observation()),
                      [F.array_sort(F.collect_set("offset")).alias("offsets"),
                       F.slice(F.array_sort(F.collect_set("index")), 1, MAX_OPS).alias("ops")]),
        "aborted-read": (["key", "value"], events.where(F.col("tag") == "read"),
                         [F.array_sort(F.collect_set("offset")).alias("offsets"),
                          F.slice(F.array_sort(F.collect_set("index")), 1, MAX_OPS - 1)
                          .alias("ops")]),
    }
    out = {}
    for kind, (cols, source, aggs) in specs.items():
        keys = [(run,) + tuple(p[c] for c in cols)
                for (run, k), (_n, payloads) in top.items() if k == kind for p in payloads]
        if not keys:
            continue
        join_cols = ["run"] + cols
        wanted = spark.createDataFrame(keys, source.select(*join_cols).schema)
        for row in (source.join(F.broadcast(wanted), join_cols).groupBy(*join_cols)
                    .agg(*aggs).collect()):
            out.setdefault((row["run"], kind), {})[tuple(row[c] for c in cols)] = row
    return out


def _pair(p: dict, first: str, second: str) -> list:
    return [p[first], p[second]]


_EXAMPLE = {
    "inconsistent-offsets": lambda p, d: {
        "key": p["key"], "offset": p["offset"],
        "values": [decode_value(v) for v in d[(p["key"], p["offset"])]["values"]],
        "ops": list(d[(p["key"], p["offset"])]["ops"])},
    "duplicate": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]),
        "offsets": list(d[(p["key"], p["value"])]["offsets"]),
        "ops": list(d[(p["key"], p["value"])]["ops"])},
    "aborted-read": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]),
        "offsets": list(d[(p["key"], p["value"])]["offsets"]),
        "ops": [p["fail_index"]] + list(d[(p["key"], p["value"])]["ops"])},
    "lost-write": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]), "offset": p["ack_offset"],
        "max_read_offset": p["max_read_offset"], "ops": [p["ack_index"], p["max_read_index"]]},
    "unseen": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]), "offset": p["ack_offset"],
        "max_read_offset": p["max_read_offset"], "ops": [p["ack_index"]]},
    "poll-skip": lambda p, d: {
        "key": p["key"], "process": p["process"], "offsets": _pair(p, "prev_offset", "offset"),
        "delta": p["delta"], "ops": _pair(p, "prev_index", "index")},
    "nonmonotonic-send": lambda p, d: {
        "key": p["key"], "process": p["process"], "offsets": _pair(p, "prev_offset", "offset"),
        "values": [decode_value(p["prev_value"]), decode_value(p["value"])],
        "ops": _pair(p, "prev_index", "index")},
    "realtime-order": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]), "offset": p["offset"],
        "earlier_offset": p["earlier_offset"], "ops": _pair(p, "earlier_index", "at")},
}
_EXAMPLE["nonmonotonic-poll"] = _EXAMPLE["poll-skip"]

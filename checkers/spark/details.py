"""The few rows behind the listed examples: one small Spark job per input table.

Why separate: counts and the first examples come out of the flag job, which
carries only ids and offsets. What an example lists besides (the values seen
at an offset, the offsets a value was seen at, the ops involved, the replicas
holding a committed record) is looked up afterwards for those <= 20 examples
per kind, by one scan of each input table joined to the (broadcast) requests.

A request names a (k, offset) or a (k, value) and, for "before", an upper
bound on the completion index. Every matching row contributes to the
request's `found` set of (offset, index, value text, node, epoch, vid, vtext)
and to its `best` (highest (offset, index)).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.spark.tables import Tables

REQUEST_SCHEMA = ("req string, k bigint, offset bigint, vid bigint, vtext boolean, "
                  "before bigint, acked_only boolean")


@dataclass(frozen=True)
class Request:
    req: str                 # what it is for (the caller's name)
    k: int
    offset: int | None = None
    vid: int | None = None
    vtext: bool | None = None
    before: int | None = None   # only rows completed before this index
    acked_only: bool = False    # sends: only ok sends with an offset


def lookup(tables: Tables, table: str, requests: list[Request]) -> dict[Request, dict]:
    """-> request -> {"found": sorted [(offset, index, text, node, epoch, vid, vtext)],
    "best": (o, i)}."""
    if not requests:
        return {}
    wanted = F.broadcast(tables.spark.createDataFrame(
        [(r.req, r.k, r.offset, r.vid, r.vtext, r.before, r.acked_only) for r in set(requests)],
        REQUEST_SCHEMA).select(*[F.col(c).alias(f"w_{c}") for c in (
            "req", "k", "offset", "vid", "vtext", "before", "acked_only")]))
    rows = _rows(tables, table, {r.k for r in requests})
    matched = rows.join(wanted, F.col("k") == F.col("w_k")).where(
        (F.col("w_offset").isNull() | (F.col("offset") == F.col("w_offset")))
        & (F.col("w_vid").isNull() | ((F.col("vid") == F.col("w_vid"))
                                      & (F.col("vtext") == F.col("w_vtext"))))
        & (F.col("w_before").isNull() | (F.col("index") < F.col("w_before")))
        & (~F.col("w_acked_only") | F.col("acked")))
    listed = F.col("w_before").isNull()
    out = {}
    for row in (matched.groupBy(*[f"w_{c}" for c in ("req", "k", "offset", "vid", "vtext",
                                                     "before", "acked_only")])
                .agg(F.collect_set(F.when(listed, F.struct("offset", "index", "value", "node",
                                                           "epoch", "vid", "vtext")))
                     .alias("found"),
                     F.max(F.struct("offset", "index")).alias("best"))
                .collect()):
        request = Request(row["w_req"], row["w_k"], row["w_offset"], row["w_vid"],
                          row["w_vtext"], row["w_before"], row["w_acked_only"])
        out[request] = {"found": sorted(tuple(f) for f in row["found"]),
                        "best": tuple(row["best"]) if row["best"] is not None else None}
    return out


def _rows(tables: Tables, table: str, only: set[int]) -> DataFrame:
    """Rows of keys `only` of an input table in the lookup shape:
    k, offset, vid, vtext, index, value, node, epoch, acked."""
    raw = tables.raw(table, only)
    none = F.lit(None)
    if table == "sends":
        acked = (F.col("type") == "ok") & F.col("offset").isNotNull()
        return raw.where(F.col("complete_index").isNotNull()).select(
            "k", "offset", "vid", "vtext", F.col("complete_index").alias("index"), "value",
            none.cast("string").alias("node"), none.cast("bigint").alias("epoch"),
            acked.alias("acked"))
    if table == "reads":
        return raw.select("k", "offset", "vid", "vtext", "index", "value",
                          none.cast("string").alias("node"), none.cast("bigint").alias("epoch"),
                          F.lit(True).alias("acked"))
    # records: only committed copies (offset below the holder's HW, past copies too) are listed
    hws = F.broadcast(tables.every_replica.select("k", "node", "hw"))
    return raw.join(hws, ["k", "node"]).where(F.col("offset") < F.col("hw")).select(
        "k", "offset", "vid", "vtext", none.cast("bigint").alias("index"), "value", "node",
        "epoch", F.lit(True).alias("acked"))

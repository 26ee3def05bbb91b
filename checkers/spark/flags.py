"""One row shape for every anomaly both Spark checkers find, and one job to collect them.

Why: job start-up dominates small runs on two cores, and a campaign may hold
millions of findings. Every check returns its findings as flag rows (run id,
kind, weight, sort columns, JSON payload); one window job counts them per
(run, kind) and keeps only the first MAX_EXAMPLES by the sort columns, the
order the in-process kernels list examples in.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame
from pyspark.sql import Window
from pyspark.sql import functions as F

from checkers.spark.tables import key_of, run_of

SORT_COLUMNS = ("a", "b", "c", "d", "t")


def with_key(frame: DataFrame) -> DataFrame:
    """Add `key` (the partition number) from k."""
    return frame.withColumn("key", key_of(F.col("k")))


def flag(frame: DataFrame, kind, payload: list, order: dict, weight=None) -> DataFrame:
    """Findings in the common shape that all checks union into.

    frame: has `k`. kind: the anomaly name, or a Column choosing it per row
    (two kinds that come out of one computation, like poll-skip and
    nonmonotonic-poll). order: sort columns a, b, c, d (bigint) and t
    (string) -> expressions; the examples of a kind are its first rows by
    (a, b, c, d, t). payload: the columns the example is built from, carried
    as one JSON text. weight: what a row adds to the kind's count (default 1).
    """
    sort = [(order[c] if c in order else F.lit(None)).cast("string" if c == "t" else "bigint")
            .alias(c) for c in SORT_COLUMNS]
    kind = F.lit(kind) if isinstance(kind, str) else kind
    return with_key(frame).select(
        run_of(F.col("k")).alias("rid"), kind.alias("kind"),
        (weight if weight is not None else F.lit(1)).cast("bigint").alias("weight"),
        *sort, F.to_json(F.struct(*payload), {"ignoreNullFields": "false"}).alias("payload"))


def top_flags(flags: list[DataFrame], runs: list[str],
              limit: int) -> dict[tuple[str, str], tuple[int, list[dict]]]:
    """One Spark job over all flag rows: (run, kind) -> (count, first `limit` payloads)."""
    union = flags[0]
    for more in flags[1:]:
        union = union.unionByName(more)
    group = Window.partitionBy("rid", "kind")
    rows = (union.withColumn("_n", F.sum("weight").over(group))
            .withColumn("_rn", F.row_number().over(group.orderBy(*SORT_COLUMNS)))
            .where(F.col("_rn") <= limit).select("rid", "kind", "_n", "_rn", "payload").collect())
    out: dict[tuple[str, str], tuple[int, list[dict]]] = {}
    for row in sorted(rows, key=lambda r: (r["rid"], r["kind"], r["_rn"])):
        count, listed = out.setdefault((runs[row["rid"]], row["kind"]), (row["_n"], []))
        listed.append(json.loads(row["payload"]))
    return out

"""The replica-log diff as Spark DataFrame jobs (no Python UDFs).

Same definitions, counts and examples as `checkers.replica_diff` (see its
docstring). Inputs are the cached facts of `checkers.spark.tables`:

- divergence: per-offset facts O whose committed copies differ in epoch or
  value (min != max of either);
- overwritten: per-offset facts O with a final committed copy and a value
  that only past copies commit (`p_values`);
- missing-committed: held offsets inside each key's committed range, a
  sentinel row at the range's end, and lag over k by offset: every step
  larger than one is a gap (weighted by its length in the count);
- lost-acknowledged: per-value facts V acknowledged but held by no replica,
  at or above the key's lowest log start (broadcast join with the per-key
  ranges, a few thousand rows).

- differences (not a finding: what readers of the logs show, see the kernel's
  docstring): offsets whose final copies hold two or more distinct (epoch,
  value); counted per run, the first MAX_DIFFERENCES per run (key, offset
  order) collected with their copies and made entries by the kernel's own
  `difference`.

`flags` returns rows in the common flag shape (`checkers.spark.flags`), collected by
the engine's one flag job.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from history.flatten import decode_value
from checkers.replica_diff import ANOMALIES, MAX_DIFFERENCES, MAX_OPS, difference, summarize, with_differences
from checkers.spark.details import Request, lookup
from checkers.spark.flags import flag
from checkers.spark.tables import Tables, differs, k_of, key_in_run, run_id, run_of

def flags(tables: Tables) -> list[DataFrame]:
    if not tables.has_dumps:  # no records nor replicas: every kind below is empty
        return []
    diverged = (F.col("c_lo") != F.col("c_hi")) | differs("c")
    return [
        flag(tables.offsets.where(F.col("c_lo").isNotNull() & diverged), "divergence",
             ["key", "offset"], {"a": F.col("key"), "b": F.col("offset")}),
        flag(tables.offsets.where(F.col("c_lo").isNotNull() & (F.col("p_values") > 0)), "overwritten",
             ["key", "offset"], {"a": F.col("key"), "b": F.col("offset")}),
        _missing_committed(tables),
        _lost_acknowledged(tables),
    ]


def _missing_committed(tables: Tables) -> DataFrame:
    """Gaps in each key's committed range, walked in offset order only for the (rare) keys
    holding fewer offsets than their range is long (counted in the key facts K)."""
    short = F.broadcast(tables.keys.where(
        F.col("high").isNotNull()
        & (F.coalesce(F.col("held_in_range"), F.lit(0)) < F.col("high") - F.col("low")))
        .select("k", "low", "high"))
    held = (tables.offsets.where(F.col("held") == 1).select("k", "offset").join(short, "k")
            .where((F.col("offset") >= F.col("low")) & (F.col("offset") < F.col("high"))))
    ends = short.select("k", F.col("high").alias("offset"), "low", "high")
    by_offset = Window.partitionBy("k").orderBy("offset")
    gaps = (held.unionByName(ends)
            .withColumn("first_offset",
                        F.coalesce(F.lag("offset").over(by_offset), F.col("low") - 1) + 1)
            .withColumn("last_offset", F.col("offset") - 1)
            .where(F.col("last_offset") >= F.col("first_offset")))
    return flag(gaps, "missing-committed", ["key", "first_offset", "last_offset"],
                {"a": F.col("key"), "b": F.col("first_offset")},
                weight=F.col("last_offset") - F.col("first_offset") + 1)


def _lost_acknowledged(tables: Tables) -> DataFrame:
    low = F.broadcast(tables.keys.where(F.col("low").isNotNull()).select("k", "low"))
    lost = (tables.values.where(F.col("ack_offset").isNotNull() & (F.col("held") == 0))
            .join(low, "k").where(F.col("ack_offset") >= F.col("low")))
    return flag(tables.with_text(lost), "lost-acknowledged",
                ["key", "value", "ack_offset", "ack_index"],
                {"a": F.col("key"), "b": F.col("ack_offset"), "t": F.col("value")})


def check(job) -> dict[str, dict]:
    """The replica diff's Spark driver (checkers.spark.engine): `flags` join the shared flag job."""
    return results(job.tables, job.top(), job.complete)


def results(tables: Tables, top: dict, complete: dict[str, bool] | None = None) -> dict[str, dict]:
    """Collected flag rows -> run -> replica-diff result (identical to the in-process kernel)."""
    holders, writers = _divergence_details(tables, top)
    complete = complete or {}
    out = {}
    for rid, run in enumerate(tables.runs):
        findings = {}
        for kind in ANOMALIES:
            count, payloads = top.get((run, kind), (0, []))
            findings[kind] = (count, [_example(kind, rid, p, holders, writers) for p in payloads])
        # (whether the final reads completed matters only to lost-acknowledged sends)
        out[run] = summarize(findings, has_dumps=tables.has_dumps and run in tables.dumped,
                             complete=complete.get(run, True),
                             final_reads=not findings["lost-acknowledged"][0] or run not in tables.unfinished)
    found = _differences(tables) if tables.has_dumps else {}
    for rid, run in enumerate(tables.runs):
        out[run] = with_differences(out[run], *found.get(rid, (0, [])))
    return out


def _differences(tables: Tables) -> dict[int, tuple[int, list[dict]]]:
    """run id -> (count, first entries) of the offsets whose final copies differ.

    Read off the cached offset facts O (h_values, h_lo, h_hi), then the copies of the
    first few collected: a countDistinct of (epoch, value) over every record took 30 of a
    10M-op check's 84 s (bisected; 54 s without it)."""
    differ = (tables.offsets.where((F.col("h_values") > 1) | (F.col("h_lo") != F.col("h_hi")))
              .select("k", "offset").withColumn("rid", run_of(F.col("k"))))
    totals = {row["rid"]: row["count"] for row in differ.groupBy("rid").count().collect()}
    if not totals:
        return {}
    first = (differ.withColumn("at", F.row_number().over(Window.partitionBy("rid").orderBy("k", "offset")))
             .where(F.col("at") <= MAX_DIFFERENCES).select("k", "offset"))
    copies = (tables.raw("records").join(F.broadcast(first), ["k", "offset"])
              .join(F.broadcast(tables.replicas.select("k", "node", "hw")), ["k", "node"])
              .select("k", "offset", "node", "epoch", "value", "hw"))
    held: dict[tuple[int, int], list[tuple]] = {}
    for row in copies.collect():
        held.setdefault((row["k"], row["offset"]), []).append((row["node"], row["epoch"], row["value"], row["hw"]))
    out = {}
    for rid, total in totals.items():
        listed = sorted(key for key in held if run_id(key[0]) == rid)
        out[rid] = (total, [difference(key_in_run(k), offset, held[(k, offset)]) for k, offset in listed])
    return out


def _example(kind, rid, p, holders, writers):
    if kind == "missing-committed":
        return {"key": p["key"], "first_offset": p["first_offset"],
                "last_offset": p["last_offset"], "ops": []}
    if kind == "lost-acknowledged":
        return {"key": p["key"], "value": decode_value(p["value"]), "offset": p["ack_offset"],
                "ops": [p["ack_index"]]}
    k = k_of(rid, p["key"])
    found = holders.get(_holders_request(k, p["offset"]), {"found": []})["found"]
    held = sorted((node, epoch, text) for _o, _i, text, node, epoch, _vid, _vtext in found)
    ops = sorted({row[1] for _o, _i, _t, _n, _e, vid, vtext in found
                  for row in writers.get(_writers_request(k, vid, vtext), {"found": []})["found"]})
    return {"key": p["key"], "offset": p["offset"],
            "replicas": [[node, epoch, decode_value(text)] for node, epoch, text in held],
            "ops": ops[:MAX_OPS]}


def _holders_request(k: int, offset: int) -> Request:
    return Request("holders", k, offset=offset)


def _writers_request(k: int, vid: int, vtext: bool) -> Request:
    """Every completed send of a value (any outcome): the ops that wrote a divergent record."""
    return Request("writers", k, vid=vid, vtext=vtext)


def _divergence_details(tables: Tables, top: dict):
    """Committed holders of each listed divergent offset, and the sends of their values."""
    requests = [_holders_request(k_of(tables.rids[run], p["key"]), p["offset"])
                for (run, kind), (_n, payloads) in top.items() if kind in ("divergence", "overwritten")
                for p in payloads]
    holders = lookup(tables, "records", requests)
    writers = [_writers_request(request.k, vid, vtext) for request, found in holders.items()
               for _o, _i, _t, _n, _e, vid, vtext in found["found"]]
    return holders, lookup(tables, "sends", writers)

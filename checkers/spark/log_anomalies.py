"""The log-anomaly checker as Spark DataFrame jobs (no Python UDFs).

Same definitions, counts and examples as `checkers.log_anomalies` (see its
docstring); a test holds the two to identical output. Every check reads the
tables of `checkers.spark.tables`, all partitioned by k (run, key), so none
of them shuffles again:

- set checks read the cached per-value facts V (duplicate, aborted-read,
  lost-write, unseen) and per-offset facts O (inconsistent-offsets);
- poll order: streams (k, session) whose offset - seq is constant read
  consecutive offsets in order and are cleared by one aggregation; in the
  others, lag over (k, session) by (index, pos) pairs consecutive reads.
  A pair one offset apart has delta 1 (both offsets are known), so only the
  other pairs need ranks; on a key whose known offsets are contiguous the
  rank of an offset is its distance from the lowest, and only keys with gaps
  rank their known offsets with a window;
- send order (`send_order`): one pass over the placed sends (acknowledged, or
  read back) with two windows: lag over (k, process) by op (nonmonotonic-send), and the
  earliest completion among sends with a higher offset (realtime-order: B is
  late iff some A with a higher offset completed before B was invoked); only
  on keys whose sends are not stepped (see `send_order`), which the
  linearizability shortcut's window finds (`checkers.spark.sequential`).

`flags` returns the findings of every other kind in one shape, so the caller
runs a single job for them (and one for send order, when some key needs it).
Only counts and the first MAX_EXAMPLES rows per kind and run reach the Python
driver; what those examples list besides comes from `checkers.spark.details`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from history.flatten import decode_value
from checkers.log_anomalies import ANOMALIES, MAX_OPS, absent_ends, absent_losses, summarize
from checkers.spark.details import Request, lookup
from checkers.spark.flags import flag
from checkers.spark.tables import Tables, differs, k_of, key_in_run, run_id

def flags(tables: Tables) -> list[DataFrame]:
    """Every kind but the send-order ones (`send_order`, which needs the stepped keys)."""
    offsets = tables.offsets
    found = [
        flag(offsets.where((F.col("obs") == 1) & differs("obs")), "inconsistent-offsets",
             ["key", "offset"], {"a": F.col("key"), "b": F.col("offset")}),
        _value_sets(tables),
        _poll_order(tables),
    ]
    return [frame for frame in found if frame is not None]


def _value_sets(tables: Tables) -> DataFrame:
    """duplicate, aborted-read, lost-write and unseen from one scan of the value facts V.

    A value may be several at once (a duplicate that was also aborted), so
    each row carries the list of its kinds and is exploded into one flag row
    per kind. Unread acknowledged values split by the key's highest read
    offset (from K): at or below it the value is lost, above it unseen.
    """
    ended = tables.ends.select("k", F.lit(True).alias("ended"), "end_offset")
    per_key = F.broadcast(tables.keys.select("k", "max_read_offset", "max_final_offset")
                          .join(ended, "k", "left"))
    duplicate = F.col("min_offset") != F.col("max_offset")
    aborted = F.col("fail_index").isNotNull() & (F.col("rd") == 1)
    acked = F.col("ack_offset").isNotNull()
    unread = acked & (F.col("rd") == 0)
    lost = F.col("ack_offset") <= F.col("max_read_offset")
    above = unread & ~F.coalesce(lost, F.lit(False))
    ended = F.coalesce(F.col("ended"), F.lit(False))
    reached = F.coalesce(F.col("ack_offset") <= F.col("max_final_offset"), F.lit(False))
    cut_back = ended & F.coalesce(F.col("ack_offset") >= F.col("end_offset"), F.lit(False))   # a truncated tail
    read_then_lost = acked & (F.col("rd") == 1) & (F.col("fin") == 0) & (reached | cut_back)
    kinds = F.filter(F.array(
        F.when(duplicate, F.lit("duplicate")), F.when(aborted, F.lit("aborted-read")),
        F.when(unread & lost, F.lit("lost-write")),
        F.when(above & ended, F.lit("unseen")), F.when(above & ~ended, F.lit("undecided-unseen")),
        F.when(read_then_lost, F.lit("read-then-lost"))),
        lambda kind: kind.isNotNull())
    found = (tables.values.join(per_key, "k", "left")
             .where(duplicate | aborted | unread | read_then_lost)
             .withColumn("kind", F.explode(kinds)))
    by_offset = F.col("kind").isin("lost-write", "unseen", "undecided-unseen", "read-then-lost")
    return flag(tables.with_text(found), F.col("kind"),
                ["key", "value", "vid", "vtext", "fail_index", "ack_offset", "ack_index",
                 "max_read_offset", "max_final_offset", "read_index"],
                {"a": F.col("key"), "b": F.when(by_offset, F.col("ack_offset")),
                 "t": F.col("value")})


def _poll_order(tables: Tables) -> DataFrame | None:
    """Consecutive reads of suspect streams, by rank among the key's known offsets."""
    suspects = tables.suspect_streams
    if suspects is not None and suspects.isEmpty():
        return None
    stream = Window.partitionBy("k", "session").orderBy("index", "pos")
    pairs = (tables.reads(suspects)
             .withColumn("prev_offset", F.lag("offset").over(stream))
             .withColumn("prev_index", F.lag("index").over(stream))
             .where(F.col("prev_offset").isNotNull()
                    & (F.col("offset") != F.col("prev_offset") + 1)))
    gappy = F.broadcast(tables.keys.where(
        F.col("known") != F.col("known_hi") - F.col("known_lo") + 1).select("k"))
    ranks = tables.offsets.where(F.col("obs") == 1).join(gappy, "k").select(
        "k", "offset", F.row_number().over(Window.partitionBy("k").orderBy("offset")).alias("rank"))
    prev_ranks = ranks.select("k", F.col("offset").alias("prev_offset"),
                              F.col("rank").alias("prev_rank"))
    delta = F.coalesce(F.col("rank") - F.col("prev_rank"), F.col("offset") - F.col("prev_offset"))
    found = (pairs.join(ranks, ["k", "offset"], "left").join(prev_ranks, ["k", "prev_offset"], "left")
             .withColumn("delta", delta).where(F.col("delta") != 1))
    return flag(found, F.when(F.col("delta") > 1, "poll-skip").otherwise("nonmonotonic-poll"),
                ["key", "process", "prev_offset", "offset", "delta", "prev_index", "index"],
                {"a": F.col("key"), "b": F.col("index"), "c": F.col("pos"), "d": F.col("session")})


def send_order(tables: Tables, unstepped: set[int] | None = None) -> DataFrame | None:
    """nonmonotonic-send and realtime-order from one pass over the placed sends of the keys
    `unstepped` (None: of all keys).

    Placed sends are those of `checkers.log_anomalies.placed_sends`: the
    acknowledged ones, and the few sends without an offset (not failed) whose
    value was read, at the lowest offset their value was observed at (V's
    min_offset). realtime-order compares acknowledged sends only (a timed-out
    send has no completion to be earlier than anything).

    The other keys are stepped (`checkers.spark.sequential.settled_keys`): each
    acknowledged send was invoked after the earlier ones completed, at a higher
    offset, and no send without an offset was read. Then a process's sends complete
    in offset order (no nonmonotonic-send), and a send at a higher offset than B was
    invoked after B completed (B is not late): nothing to find, and the two window
    sorts are skipped.
    """
    if unstepped is not None and not unstepped:
        return None
    keys = (None if unstepped is None else
            tables.spark.createDataFrame([(k,) for k in sorted(unstepped)], "k bigint"))
    sends = tables.sends(keys).withColumn(
        "acked", (F.col("type") == 0) & F.col("offset").isNotNull())
    read_at = tables.values.where(F.col("rd") == 1).select(
        "k", "vid", "vtext", F.col("min_offset").alias("read_offset"))
    # The few sends without an offset are hashed; V streams past them (as in checkers.spark.sequential).
    placed = (sends.where((F.col("type") != 1) & F.col("offset").isNull()).hint("shuffle_hash")
              .join(read_at, ["k", "vid", "vtext"])
              .withColumn("offset", F.col("read_offset")).drop("read_offset"))
    # (stream, k) with stream a 64-bit hash of (k, process): the window's sort then decides
    # nearly every comparison on its 64-bit prefix, not on a string (this window over 4.9M
    # acks: 9.9 -> 6.6 CPU-s, measured). Two processes of one key would have to collide in
    # 64 bits for their streams to merge.
    by_process = Window.partitionBy("stream", "k").orderBy("op_at", "offset")
    higher = (Window.partitionBy("k").orderBy("neg_offset")
              .rangeBetween(Window.unboundedPreceding, -1))
    scanned = (sends.where(F.col("acked")).unionByName(placed)
               .withColumn("stream", F.xxhash64("k", "process"))
               .withColumn("op_at", F.coalesce(F.col("complete_index"), F.col("invoke_index")))
               .withColumn("prev_offset", F.lag("offset").over(by_process))
               .withColumn("prev_index", F.lag("op_at").over(by_process))
               .withColumn("prev_vid", F.lag("vid").over(by_process))
               .withColumn("prev_vtext", F.lag("vtext").over(by_process))
               .withColumn("neg_offset", -F.col("offset"))
               .withColumn("first_done_higher",
                           F.min(F.when(F.col("acked"), F.col("complete_index"))).over(higher)))
    backwards = (F.col("offset") <= F.col("prev_offset")) & (F.col("op_at") != F.col("prev_index"))
    late = F.col("acked") & (F.col("first_done_higher") < F.col("invoke_index"))
    kinds = F.filter(F.array(F.when(backwards, F.lit("nonmonotonic-send")),
                             F.when(late, F.lit("realtime-order"))), lambda kind: kind.isNotNull())
    found = scanned.where(backwards | late).withColumn("kind", F.explode(kinds))
    found = tables.with_text(tables.with_text(found), "prev_vid", "prev_vtext", "prev_value")
    is_late = F.col("kind") == "realtime-order"
    return flag(found, F.col("kind"),
                ["key", "process", "prev_offset", "offset", "prev_value", "value",
                 "prev_index", F.col("op_at").alias("index"),
                 F.col("invoke_index").alias("at")],
                {"a": F.col("key"),
                 "b": F.when(is_late, F.col("invoke_index")).otherwise(F.col("op_at")),
                 "c": F.when(is_late, F.col("offset"))})


SETTLED = True  # check() uses job.settled() (checkers.spark.engine)


def check(job) -> dict[str, dict]:
    """The log checker's Spark driver (checkers.spark.engine): `flags` join the shared
    flag job; the send-order kinds are flagged here, only on the keys whose
    acknowledged sends the time-order window did not find stepped."""
    from checkers.log_anomalies import MAX_EXAMPLES
    from checkers.spark.flags import top_flags

    per_key, _seconds = job.settled()
    late = send_order(job.tables, {row["k"] for row in per_key if not row["stepped"]})
    found = top_flags([late], job.runs, MAX_EXAMPLES) if late is not None else {}
    return results(job.tables, {**job.top(), **found})


def results(tables: Tables, top: dict) -> dict[str, dict]:
    """Collected flag rows -> run -> checker result (identical to the in-process kernel)."""
    listed = {(run, kind): payloads for (run, kind), (_n, payloads) in top.items()}
    details = _details(tables, listed)
    out = {}
    for rid, run in enumerate(tables.runs):
        findings = {}
        for kind in ANOMALIES:
            count, payloads = top.get((run, kind), (0, []))
            findings[kind] = (count, [_EXAMPLE[kind](p, _at(details, rid, kind, p))
                                      for p in payloads])
        count, payloads = top.get((run, "undecided-unseen"), (0, []))
        findings["undecided-unseen"] = (count, sorted({p["key"] for p in payloads}))
        out[run] = summarize(findings, checked=run in tables.observed)
    _absent(tables, out)
    return out


def _absent(tables: Tables, out: dict[str, dict]) -> None:
    """Keys whose log was gone (ends.absent): their few rows are collected and
    `checkers.log_anomalies.absent_losses` counts them, as the in-process kernel does."""
    from history.flatten import END_COLUMNS, READ_COLUMNS, SEND_COLUMNS

    ends = tables.ends.where(F.col("absent").isNotNull()).select("k", *END_COLUMNS[1:]).collect()
    if not ends:
        return
    only = {row["k"] for row in ends}
    sends = tables.raw("sends", only).select("k", *SEND_COLUMNS[1:]).collect()
    reads = tables.raw("reads", only).select("k", *READ_COLUMNS[1:]).collect()
    for rid, run in enumerate(tables.runs):
        def rows(found):
            return [(key_in_run(r[0]), *r[1:]) for r in found if run_id(r[0]) == rid]
        run_ends = rows(ends)
        if run_ends and run in out:
            absent_losses(out[run], absent_ends(run_ends), rows(sends), rows(reads), run_ends)


def _requests(rid: int, kind: str, p: dict) -> dict[str, Request]:
    """The lookups (by table) one example needs."""
    if kind not in ("inconsistent-offsets", "duplicate", "aborted-read", "realtime-order",
                    "lost-write"):
        return {}
    k = k_of(rid, p["key"])
    if kind == "lost-write":  # the first poll that read the key's highest offset
        return {"reads": Request(kind, k, offset=p["max_read_offset"])}
    if kind == "inconsistent-offsets":
        return {t: Request(kind, k, offset=p["offset"], acked_only=True)
                for t in ("sends", "reads")}
    if kind == "duplicate":
        return {t: Request(kind, k, vid=p["vid"], vtext=p["vtext"], acked_only=True)
                for t in ("sends", "reads")}
    if kind == "aborted-read":
        return {"reads": Request(kind, k, vid=p["vid"], vtext=p["vtext"])}
    return {"sends": Request(kind, k, before=p["at"], acked_only=True)}


def _details(tables: Tables, listed: dict) -> dict:
    """One lookup job per input table for every listed example that needs one."""
    by_table: dict[str, list[Request]] = {}
    for (run, kind), payloads in listed.items():
        for p in payloads:
            for table, request in _requests(tables.rids[run], kind, p).items():
                by_table.setdefault(table, []).append(request)
    return {table: lookup(tables, table, requests) for table, requests in by_table.items()}


def _at(details: dict, rid: int, kind: str, p: dict) -> dict:
    """table -> lookup result for this example."""
    return {table: details.get(table, {}).get(request, {"found": [], "best": None})
            for table, request in _requests(rid, kind, p).items()}


def _found(d: dict) -> list[tuple]:
    return [row for table in ("sends", "reads") if table in d for row in d[table]["found"]]


def _ops(rows: list[tuple], limit: int = MAX_OPS) -> list[int]:
    return sorted({row[1] for row in rows})[:limit]


def _pair(p: dict, first: str, second: str) -> list:
    return [p[first], p[second]]


def _poll_example(p, _d):
    return {"key": p["key"], "process": p["process"], "offsets": _pair(p, "prev_offset", "offset"),
            "delta": p["delta"], "ops": _pair(p, "prev_index", "index")}


_EXAMPLE = {
    "inconsistent-offsets": lambda p, d: {
        "key": p["key"], "offset": p["offset"],
        "values": [decode_value(v) for v in sorted({row[2] for row in _found(d)})],
        "ops": _ops(_found(d))},
    "duplicate": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]),
        "offsets": sorted({row[0] for row in _found(d)}), "ops": _ops(_found(d))},
    "aborted-read": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]),
        "offsets": sorted({row[0] for row in _found(d)}),
        "ops": [p["fail_index"]] + _ops(_found(d), MAX_OPS - 1)},
    "lost-write": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]), "offset": p["ack_offset"],
        "max_read_offset": p["max_read_offset"],
        "ops": [p["ack_index"], min(row[1] for row in d["reads"]["found"])]},
    "unseen": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]), "offset": p["ack_offset"],
        "max_read_offset": p["max_read_offset"], "ops": [p["ack_index"]]},
    "read-then-lost": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]), "offset": p["ack_offset"],
        "max_final_offset": p["max_final_offset"], "ops": [p["ack_index"], p["read_index"]]},
    "poll-skip": _poll_example,
    "nonmonotonic-poll": _poll_example,
    "nonmonotonic-send": lambda p, d: {
        "key": p["key"], "process": p["process"], "offsets": _pair(p, "prev_offset", "offset"),
        "values": [decode_value(p["prev_value"]), decode_value(p["value"])],
        "ops": _pair(p, "prev_index", "index")},
    "realtime-order": lambda p, d: {
        "key": p["key"], "value": decode_value(p["value"]), "offset": p["offset"],
        "earlier_offset": d["sends"]["best"][0], "ops": [d["sends"]["best"][1], p["at"]]},
}

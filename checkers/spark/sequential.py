"""Keys the linearizability search can skip: calls in real-time order, legal for the log.

Why: a key whose definite calls never overlap in real time has one order that
respects real time, so it is linearizable iff that order is legal; the search
(`checkers.linear.wgl`) would only step through it (n calls, n + 1 configs).
Deciding that with column expressions keeps those keys' rows in the JVM; only
the other keys' rows are shipped to the Python search. This is the Spark form,
for the `log` model after `Log.prepare`, of a key whose windows
(`wgl.windows`) are all single calls:

- calls: ok sends with an offset (appends), polls (one per poll of the key:
  its read at position 0) and the key's end; a failed send is none;
- by invocation, every call is invoked after each earlier one completed (one
  window sort of the calls; two reads of one poll at position 0 would overlap);
- the i-th append is at offset i, the end equals the appends before it;
- reads, from the cached triples T of `checkers.spark.tables`: every read
  (offset, value) was acknowledged at that offset (so, one append per offset,
  all observed values of an offset agree; values compared by id as the log
  checker does: integers exactly, other texts by 64-bit hash), and the first
  poll reading it completed after that send did (the calls do not overlap, so
  every poll reading it came after it); every read stream of the key reads
  consecutive offsets (no suspect stream), so no poll skips an observed offset;
- no indefinite send survives prepare: its value is pinned nowhere on the key
  (per-value facts V) and, by the rules above, every offset up to the top is
  pinned (no gap), so prepare drops it.

A key failing any rule (concurrent calls, an indefinite send that may land,
an illegal step) goes to the search, which gives its verdict and counterexample.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.spark.tables import Tables

APPEND, POLL, END = 0, 1, 2


def _calls(tables: Tables) -> DataFrame:
    """k, kind, a (invocation), b (completion), offset: a row per call (appends, polls, ends).

    Unpartitioned inputs: the window's one shuffle by k puts them together (a
    union of inputs partitioned alike is not known to be, and would be shuffled again).
    """
    sends = tables._keyed("sends")
    none = F.lit(None).cast("bigint")
    appends = sends.where((F.col("type") == "ok") & F.col("offset").isNotNull()).select(
        "k", F.lit(APPEND).alias("kind"), F.col("invoke_index").alias("a"),
        F.col("complete_index").alias("b"), "offset")
    polls = tables._keyed("reads").where(F.col("pos") == 0).select(
        "k", F.lit(POLL).alias("kind"), F.col("invoke_index").alias("a"),
        F.col("index").alias("b"), none.alias("offset"))
    ends = tables.ends.select(
        "k", F.lit(END).alias("kind"), F.col("invoke_index").alias("a"),
        F.col("complete_index").alias("b"), F.col("end_offset").alias("offset"))
    return appends.unionByName(polls).unionByName(ends)


def _other_sends(tables: Tables) -> DataFrame:
    """k, risky: per key with failed or indefinite sends, how many indefinite ones may land
    (their value is pinned on the key, so prepare keeps them)."""
    sends = tables.raw("sends")
    append = F.col("type").eqNullSafe("ok") & F.col("offset").isNotNull()
    pinned = tables.values.where(F.col("min_offset").isNotNull()).select("k", "vid", "vtext")
    failed = F.col("type").eqNullSafe("fail")
    # The few indefinite sends are hashed; the value facts V (millions of rows, already
    # partitioned by k) stream past them instead of being sorted for a merge join.
    landing = (sends.where(~append & ~failed).hint("shuffle_hash")
               .join(pinned, ["k", "vid", "vtext"]).select("k", F.lit(1).alias("risky")))
    return (sends.where(~append).select("k", F.lit(0).alias("risky")).unionByName(landing)
            .groupBy("k").agg(F.sum("risky").alias("risky")))


def _in_order(calls: DataFrame) -> DataFrame:
    """Each call row with `good`: invoked after every earlier call completed, and legal;
    and `stepped`: not an append, or one invoked after every earlier append completed, at a
    higher offset than all of them (the same window, for the send-order shortcut)."""
    kind = F.col("kind")
    earlier = (Window.partitionBy("k").orderBy("a", "b", "kind")
               .rowsBetween(Window.unboundedPreceding, -1))
    done_before = F.max("b").over(earlier)
    append = kind == APPEND
    appends_before = F.coalesce(F.sum(append.cast("bigint")).over(earlier), F.lit(0))
    appended_before = F.max(F.when(append, F.col("b"))).over(earlier)
    top_offset_before = F.max(F.when(append, F.col("offset"))).over(earlier)
    a, b = F.col("a"), F.col("b")
    timely = (a.isNotNull() & b.isNotNull() & (a <= b)
              & (done_before.isNull() | (a > done_before)))
    legal = (kind == POLL) | (F.col("offset") == appends_before)
    stepped = ~append | (a.isNotNull() & (appended_before.isNull() | (a > appended_before))
                         & (top_offset_before.isNull() | (F.col("offset") > top_offset_before)))
    return (calls.withColumn("good", F.coalesce(timely & legal, F.lit(False)))
            .withColumn("stepped", F.coalesce(stepped, F.lit(False))))


def _unfit_keys(tables: Tables) -> DataFrame:
    """k of keys whose reads break a rule: a read of something not acknowledged there
    before it, or a suspect read stream (all streams when there are too many suspects)."""
    unacked = tables.triples.where(
        (F.col("rd") == 1) & ~F.coalesce(F.col("read_index") > F.col("ack_index"), F.lit(False))
    ).select("k")
    streams = tables.suspect_streams
    if streams is None:
        streams = tables._keyed("reads").select("k")
    return unacked.unionByName(streams.select("k")).distinct()


def settled_keys(tables: Tables) -> DataFrame:
    """k, calls, sequential, stepped: every key of the sends, reads and ends; sequential
    keys are linearizable with `calls` calls and need no search; on stepped keys the
    acknowledged sends never overlap in time and their offsets grow with it, and no send
    without an offset was observed (`risky`: none is placed by a read), so no send is
    out of order (`checkers.spark.log_anomalies` skips their send-order windows)."""
    per_key = _in_order(_calls(tables)).groupBy("k").agg(
        F.count("*").alias("calls"), F.count(F.when(~F.col("good"), F.lit(1))).alias("wrong"),
        F.count(F.when(~F.col("stepped"), F.lit(1))).alias("unstepped"))
    unfit = F.broadcast(_unfit_keys(tables).withColumn("unfit", F.lit(True)))
    return (per_key.join(_other_sends(tables), "k", "full").join(unfit, "k", "left").select(
        "k", F.coalesce(F.col("calls"), F.lit(0)).alias("calls"),
        ((F.coalesce(F.col("wrong"), F.lit(0)) == 0) & (F.coalesce(F.col("risky"), F.lit(0)) == 0)
         & F.col("unfit").isNull()).alias("sequential"),
        ((F.coalesce(F.col("unstepped"), F.lit(0)) == 0)
         & (F.coalesce(F.col("risky"), F.lit(0)) == 0)).alias("stepped")))

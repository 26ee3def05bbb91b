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

Most keys of a history with concurrent clients fail the first rule, and two calls
that overlap anywhere prove it: `overlapping_keys` looks for such a pair among
each run's first `SAMPLE_POSITIONS` history positions (a read of those row groups,
in the driver, by pyarrow), and `settled_rows` sends only the other keys through
the window. Both answers are shortcuts, never verdicts: a key declared neither
sequential nor stepped is searched (and counted as the search counts it) and its
sends go through the send-order windows, so every result stays the same.
"""

from __future__ import annotations

import numpy as np
import pyarrow.dataset as ds
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from history.parquet import SCHEMAS, table_paths
from checkers.spark.tables import KEY_LIMIT, KEY_SPAN, Tables

APPEND, POLL, END = 0, 1, 2
# When the sample proves all but this share of the keys concurrent, the rest are searched
# rather than settled by the window (`settled_rows`).
FEW_UNPROVEN = 0.1


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


def _other_sends(tables: Tables, keep=lambda frame: frame) -> DataFrame:
    """k, risky: per key with failed or indefinite sends, how many indefinite ones may land
    (their value is pinned on the key, so prepare keeps them). keep: a filter of keys."""
    sends = keep(tables.raw("sends"))
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


def _unfit_keys(tables: Tables, keep=lambda frame: frame) -> DataFrame:
    """k of keys whose reads break a rule: a read of something not acknowledged there
    before it, or a suspect read stream (all streams when there are too many suspects).
    keep: a filter of keys."""
    unacked = tables.triples.where(
        (F.col("rd") == 1) & ~F.coalesce(F.col("read_index") > F.col("ack_index"), F.lit(False))
    ).select("k")
    streams = tables.suspect_streams
    if streams is None:
        streams = tables._keyed("reads").select("k")
    return keep(unacked.unionByName(streams.select("k"))).distinct()


# History positions per run that `overlapping_keys` reads: the 10M-line bench history's
# first 1M positions prove 945 of its 1,000 keys concurrent (and the whole history all
# of them) in 0.75 CPU-s, against the window's 22-37 JVM CPU-s for the keys it settles
# none of (docs/performance.md, session 29). The cap bounds the driver's read on longer runs.
SAMPLE_POSITIONS = 2_000_000
POSITION_LIMIT = 1 << 40


def overlapping_keys(tables: Tables, positions: int = SAMPLE_POSITIONS) -> set[int]:
    """k of the keys with two calls (appends, polls) that overlap in real time among
    each run's first `positions` history positions: such a key is not sequential (the
    window would find a call invoked before an earlier one completed). Calls as in
    `_calls`; keys outside int32 are left to the window, which fails on them loudly."""
    found: set[int] = set()
    for rid, (run_dir, run) in enumerate(zip(tables.run_dirs, tables.runs)):
        early = (ds.field("run") == run) & (ds.field("invoke_index") < positions)
        sends = ds.dataset(table_paths([run_dir], "sends")[0], schema=SCHEMAS["sends"]).to_table(
            columns=["key", "invoke_index", "complete_index"],
            filter=early & (ds.field("type") == "ok") & ds.field("offset").is_valid()
            & ds.field("complete_index").is_valid())
        polls = ds.dataset(table_paths([run_dir], "reads")[0], schema=SCHEMAS["reads"]).to_table(
            columns=["key", "invoke_index", "index"],
            filter=early & (ds.field("pos") == 0) & ds.field("index").is_valid())
        key = np.concatenate([sends["key"].to_numpy(), polls["key"].to_numpy()])
        a = np.concatenate([sends["invoke_index"].to_numpy(), polls["invoke_index"].to_numpy()])
        b = np.concatenate([sends["complete_index"].to_numpy(), polls["index"].to_numpy()])
        # positions outside [0, 2^40) (none in a real history) are left to the window too,
        # so that `_overlapping`'s lifted maxima cannot overflow
        fits = (key >= -KEY_LIMIT) & (key < KEY_LIMIT) & (a >= 0) & (b >= 0) & (b < POSITION_LIMIT)
        found.update(int(k) + rid * KEY_SPAN for k in _overlapping(key[fits], a[fits], b[fits]))
    return found


def _overlapping(key: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The keys with a call invoked at or before the latest completion of the key's
    calls before it (in (a, b) order: the window's rule for a call that is not timely).
    Positions are in [0, POSITION_LIMIT)."""
    if len(key) == 0:
        return key
    order = np.lexsort((b, a, key))
    key, a, b = key[order], a[order], b[order]
    first = np.r_[True, key[1:] != key[:-1]]
    group = np.cumsum(first) - 1
    # the running max of b within each key's run of rows: offset every key's b above the
    # previous keys' (positions are >= 0 and < span), so one running max does all keys
    span = int(max(b.max(), a.max())) + 2
    lifted = group * span + b
    done_before = np.r_[-1, np.maximum.accumulate(lifted)[:-1]] - group * span
    return np.unique(key[~first & (a <= done_before)])


def search_all(tables: Tables) -> set[int] | None:
    """Every key to search, when the sample proves nearly all concurrent (the harness's own
    runs: a few keys, all shared by the clients; a history of concurrent clients: 998 of
    1,000), else None (the window settles the others). Then the few unproven keys are
    searched too (a sequential key steps through in milliseconds) and the window's job,
    which needs the triples T and V (~40 JVM CPU-s at 10M ops), is not run. Computed once
    per `tables` (the range pass asks before it starts, the settle job again)."""
    concurrent = _concurrent(tables)
    unproven = tables.call_keys - concurrent if concurrent else None
    few = unproven is not None and len(unproven) <= FEW_UNPROVEN * len(tables.call_keys)
    return concurrent | unproven if few else None


def _concurrent(tables: Tables) -> set[int]:
    """`overlapping_keys` of the check, read once per `tables`."""
    with tables._building:
        if "_concurrent" not in tables.__dict__:
            tables.__dict__["_concurrent"] = overlapping_keys(tables)
        return tables.__dict__["_concurrent"]


def settled_rows(tables: Tables) -> list:
    """The collected rows of `settled_keys` for every key: the keys `overlapping_keys`
    proves concurrent are rows of their own (calls 0, neither sequential nor stepped)
    and stay out of the window's job, which does not run when they are every key."""
    searched = search_all(tables)
    if searched is not None:
        return [{"k": k, "calls": 0, "sequential": False, "stepped": False} for k in sorted(searched)]
    concurrent = _concurrent(tables)
    return settled_keys(tables, concurrent).collect() + [
        {"k": k, "calls": 0, "sequential": False, "stepped": False} for k in sorted(concurrent)]


def _dropping(tables: Tables, without: set[int]):
    """A filter of frames with a k column: the rows of keys not in `without` (a broadcast anti-join)."""
    if not without:
        return lambda frame: frame
    skip = F.broadcast(tables.spark.createDataFrame([(k,) for k in sorted(without)], "k bigint"))
    return lambda frame: frame.join(skip, "k", "left_anti")


def settled_keys(tables: Tables, without: set[int] = frozenset()) -> DataFrame:
    """k, calls, sequential, stepped: every key of the sends, reads and ends; sequential
    keys are linearizable with `calls` calls and need no search; on stepped keys the
    acknowledged sends never overlap in time and their offsets grow with it, and no send
    without an offset was observed (`risky`: none is placed by a read), so no send is
    out of order (a fact the tests hold to the log checker's; no driver reads it since the
    log checker's counts moved to `checkers.log_arrays`).
    without: leave these k out (before the window's shuffle)."""
    keep = _dropping(tables, without)
    per_key = _in_order(keep(_calls(tables))).groupBy("k").agg(
        F.count("*").alias("calls"), F.count(F.when(~F.col("good"), F.lit(1))).alias("wrong"),
        F.count(F.when(~F.col("stepped"), F.lit(1))).alias("unstepped"))
    unfit = F.broadcast(_unfit_keys(tables, keep).withColumn("unfit", F.lit(True)))
    return (per_key.join(_other_sends(tables, keep), "k", "full").join(unfit, "k", "left").select(
        "k", F.coalesce(F.col("calls"), F.lit(0)).alias("calls"),
        ((F.coalesce(F.col("wrong"), F.lit(0)) == 0) & (F.coalesce(F.col("risky"), F.lit(0)) == 0)
         & F.col("unfit").isNull()).alias("sequential"),
        ((F.coalesce(F.col("unstepped"), F.lit(0)) == 0)
         & (F.coalesce(F.col("risky"), F.lit(0)) == 0)).alias("stepped")))

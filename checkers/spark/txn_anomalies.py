"""The txn checker on Spark: the two steps of the in-process engine, the first
in Spark's tasks, the second on the driver.

1. The sends and reads of every run are read from Parquet once, as integer
   columns (a value as its id, checkers.spark.tables; a process as its 64-bit
   xxhash; a transaction as run id * 2^40 + its invocation index), and
   hash-partitioned by `k` (run and key). Each task hands its rows to Python
   (`mapInArrow`: columnar, no pickled rows) and runs `checkers.txn.keys` on
   them: every key's rows are in one task, and nothing in that step needs
   another key. It answers tagged integer rows: ww and wr edges, each
   transaction it saw, and the few rows of findings.
2. The driver collects those rows through Arrow, splits them per run and runs
   `checkers.txn.assemble` and the cycle search (checkers.txn.cycles), the code
   the in-process engine runs, so both engines give the same answers.

Why this shape (measured, bench/txn_check.py; docs/performance.md): the previous
driver expressed each definition as Spark SQL (joins, windows and aggregations
over cached frames): 1M transactions took 70-86 JVM CPU-s, ten shuffles of the
rows. Here the rows are shuffled once, and the per-key work is the pandas and
numpy code of the in-process engine, a few CPU-µs per row.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from checkers.txn.graph import FAIL, INFO, OK

TXN_BITS = 40   # a transaction id: run id << TXN_BITS | invocation index
TXN_MASK = (1 << TXN_BITS) - 1
OUT = "tag byte, a long, b long, c long, d long"
# tags of the rows a task answers (a value's vt is added to the tags that carry a value;
# an unread send's type too: UNREAD + vt + 2 * (t == INFO))
WW_ROW, WR_ROW, NODE, PROVEN = 0, 1, 2, 5       # NODE + t (OK, FAIL, INFO)
INCONSISTENT, DUPLICATE, ABORTED_READ, OWN_READ, UNREAD, MAX_READ = 6, 8, 10, 12, 14, 18


def _rows(tables):
    """Sends and reads as one frame of integer columns, `send` telling them apart."""
    kind = F.col("type")
    txn = F.col("rid") * (1 << TXN_BITS) + F.col("invoke_index")
    value = [F.col("vtext").cast("byte").alias("vt"), F.col("vid").alias("v")]
    sends = tables.raw("sends").select(
        "k", *value, "offset",
        F.when(kind == "ok", OK).when(kind == "fail", FAIL).otherwise(INFO).cast("byte").alias("t"),
        F.xxhash64("process").alias("p"), txn.alias("txn"),
        F.coalesce(F.col("complete_index"), F.lit(-1)).alias("complete"), F.lit(True).alias("send"))
    reads = tables.raw("reads").select(
        "k", *value, "offset", F.lit(OK).cast("byte").alias("t"), F.xxhash64("process").alias("p"),
        txn.alias("txn"), F.col("index").alias("complete"), F.lit(False).alias("send"))
    return sends.unionByName(reads)


def _task(ended: np.ndarray, batches):
    """One task: its keys' rows -> tagged rows of their facts (runs in a Python worker)."""
    from checkers.txn.keys import key_facts

    batches = list(batches)
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    if not table.num_rows:
        return
    send = table.column("send").to_numpy()

    def col(name, rows, dtype=np.int64):
        return table.column(name).filter(pa.array(rows)).to_numpy().astype(dtype, copy=False)

    reads = ~send
    offsets = pc.cast(table.column("offset").filter(pa.array(send)), pa.float64()).to_numpy(zero_copy_only=False)
    S = pd.DataFrame({"key": col("k", send), "vt": col("vt", send, np.int8), "v": col("v", send),
                      "offset": offsets, "t": col("t", send, np.int8), "p": col("p", send),
                      "txn": col("txn", send), "complete": col("complete", send)})
    R = pd.DataFrame({"key": col("k", reads), "vt": col("vt", reads, np.int8), "v": col("v", reads),
                      "offset": col("offset", reads), "p": col("p", reads), "txn": col("txn", reads),
                      "complete": col("complete", reads)})
    yield from _encode(key_facts(S, R, ended))


def _batch(tag, a, b=None, c=None, d=None, c_null=None) -> pa.RecordBatch:
    """Tagged rows; a column a kind does not use is zeros (no null buffers to build)."""
    n = len(a)
    zeros = np.zeros(n, dtype=np.int64)
    tags = tag if isinstance(tag, np.ndarray) else np.full(n, tag, dtype=np.int8)

    def column(x, null=None):
        x = zeros if x is None else np.asarray(x, dtype=np.int64)
        return pa.array(x, mask=null) if null is not None and null.any() else pa.array(x)

    return pa.RecordBatch.from_arrays([pa.array(tags.astype(np.int8)), column(a), column(b),
                                       column(c, c_null), column(d)], names=["tag", "a", "b", "c", "d"])


def _encode(facts):
    if len(facts.ww):
        yield _batch(WW_ROW, facts.ww[:, 0], facts.ww[:, 1])
    if len(facts.wr):
        yield _batch(WR_ROW, facts.wr[:, 0], facts.wr[:, 1])
    nodes = facts.nodes
    if len(nodes):
        yield _batch(NODE + nodes["t"].to_numpy(np.int8), nodes["txn"], nodes["p"], nodes["complete"])
    if len(facts.proven):
        yield _batch(PROVEN, facts.proven)
    for tag, frame, cols in ((INCONSISTENT, facts.inconsistent, ("key", "offset", "v")),
                             (DUPLICATE, facts.duplicate, ("key", "offset", "v")),
                             (ABORTED_READ, facts.aborted_reads, ("key", "w", "v", "r")),
                             (OWN_READ, facts.own_reads, ("w", "key", "v"))):
        if len(frame):
            yield _batch(tag + frame["vt"].to_numpy(np.int8), *(frame[c].to_numpy(np.int64) for c in cols))
    unread = facts.unread
    if len(unread):
        offset = unread["offset"].to_numpy(np.float64)
        known = ~np.isnan(offset)
        yield _batch(UNREAD + unread["vt"].to_numpy(np.int8) + 2 * (unread["t"].to_numpy(np.int8) == INFO),
                     unread["key"], unread["v"], np.where(known, offset, 0).astype(np.int64),
                     unread["w"], c_null=~known)
    if len(facts.max_read):
        yield _batch(MAX_READ, facts.max_read["key"], facts.max_read["offset"])


def _per_run(table: pa.Table, runs: int) -> list[pa.Table]:
    """The collected rows split by run: a row's run is in the high bits of its transaction
    id (edges, transactions, own reads) or of its k (the other findings)."""
    if runs == 1:
        return [table]
    from checkers.spark.tables import KEY_BITS, KEY_LIMIT

    tag, a = table.column("tag").to_numpy(), table.column("a").to_numpy()
    by_key = np.isin(tag, [INCONSISTENT, INCONSISTENT + 1, DUPLICATE, DUPLICATE + 1, ABORTED_READ,
                           ABORTED_READ + 1, UNREAD, UNREAD + 1, UNREAD + 2, UNREAD + 3, MAX_READ])
    rid = np.where(by_key, (a + KEY_LIMIT) >> KEY_BITS, a >> TXN_BITS)
    order = np.argsort(rid, kind="stable")
    bounds = np.searchsorted(rid[order], np.arange(runs + 1))
    return [table.take(order[bounds[i]:bounds[i + 1]]) for i in range(runs)]


def _decode(table: pa.Table):
    """One run's KeyFacts from its collected rows (transaction ids without the run's bits)."""
    from checkers.txn.keys import KeyFacts

    table = table.combine_chunks()  # one copy in C++: to_numpy of ~1,000 small chunks was 5x slower
    tag = table.column("tag").to_numpy()
    a, b, c, d = (table.column(x).to_numpy(zero_copy_only=False) for x in "abcd")
    c_known = table.column("c").is_valid().to_numpy(zero_copy_only=False)

    def pick(lo, hi):
        return (tag >= lo) & (tag < hi)

    def txn(x):
        return x & TXN_MASK

    ww, wr, nodes, proven = pick(WW_ROW, WW_ROW + 1), pick(WR_ROW, WR_ROW + 1), pick(NODE, NODE + 3), pick(PROVEN, PROVEN + 1)
    inc, dup = pick(INCONSISTENT, INCONSISTENT + 2), pick(DUPLICATE, DUPLICATE + 2)
    ab, own = pick(ABORTED_READ, ABORTED_READ + 2), pick(OWN_READ, OWN_READ + 2)
    un, mr = pick(UNREAD, UNREAD + 4), pick(MAX_READ, MAX_READ + 1)
    return KeyFacts(
        np.stack([txn(a[ww]), txn(b[ww])], axis=1), np.stack([txn(a[wr]), txn(b[wr])], axis=1),
        pd.DataFrame({"txn": txn(a[nodes]), "t": (tag[nodes] - NODE).astype(np.int8), "p": b[nodes],
                      "complete": c[nodes]}),
        txn(a[proven]),
        pd.DataFrame({"key": a[inc], "offset": b[inc], "vt": tag[inc] - INCONSISTENT, "v": c[inc]}),
        pd.DataFrame({"key": a[dup], "vt": tag[dup] - DUPLICATE, "v": c[dup], "offset": b[dup]}),
        pd.DataFrame({"key": a[ab], "w": txn(b[ab]), "vt": tag[ab] - ABORTED_READ, "v": c[ab], "r": txn(d[ab])}),
        pd.DataFrame({"w": txn(a[own]), "key": b[own], "vt": tag[own] - OWN_READ, "v": c[own]}),
        pd.DataFrame({"key": a[un], "vt": (tag[un] - UNREAD) % 2, "v": b[un],
                      "offset": np.where(c_known[un], c[un], np.nan), "w": txn(d[un]),
                      "t": np.where((tag[un] - UNREAD) >= 2, INFO, OK)}),
        pd.DataFrame({"key": a[mr], "offset": b[mr]}))


def _texts(tables, refs) -> dict:
    """(k, 1, vid) -> the decoded text of a few non-integer values (one small job)."""
    from history.flatten import decode_value

    wanted = {(k, v) for k, vt, v in refs if vt}
    if not wanted:
        return {}
    ks, vids = sorted({k for k, _ in wanted}), sorted({v for _, v in wanted})
    found = {}
    for name in ("sends", "reads"):
        for row in (tables.raw(name).where(F.col("vtext") & F.col("k").isin(ks) & F.col("vid").isin(vids))
                    .select("k", "vid", "value").distinct().collect()):
            found[(row["k"], 1, row["vid"])] = decode_value(row["value"])
    return found


def check(job) -> dict:
    """{run: the txn checker's result}, searched and worded by the in-process code."""
    from checkers.spark.tables import key_in_run
    from checkers.txn import cycles
    from checkers.txn.assemble import assemble
    from checkers.txn.explain import cycle_transactions
    from checkers.txn.result import summarize

    from checkers.spark.session import ship_package

    tables = job.tables
    ship_package(tables.spark.sparkContext)  # the tasks import checkers.txn on a cluster's executors too
    ended = np.array(sorted({row["k"] for row in tables.ends.select("k").collect()}), dtype=np.int64)
    collected = (_rows(tables).repartition(tables.width, "k")
                 .mapInArrow(partial(_task, ended), OUT).toArrow())
    out = {}
    for rid, (run, rows) in enumerate(zip(job.runs, _per_run(collected, len(job.runs)))):
        facts = _decode(rows)

        def decode(refs):
            texts = _texts(tables, refs)
            return {ref: ref[2] if ref[1] == 0 else texts[ref] for ref in refs}

        graph = assemble(facts, decode, key_in_run)
        found = cycles.search(graph)
        out[run] = summarize(graph, found, _evidence(tables, rid, cycle_transactions(found.cycles)))
    return out


def _evidence(tables, rid: int, wanted: set[int]):
    """The flat rows of a few transactions of one run (one small job each table)."""
    from checkers.txn.explain import Evidence

    if not wanted:
        return Evidence([], [])
    ids = sorted(wanted)
    sends = (tables.raw("sends").where((F.col("rid") == rid) & F.col("invoke_index").isin(ids))
             .select("key", "value", "offset", "type", "process", "invoke_index", "complete_index").collect())
    reads = (tables.raw("reads").where((F.col("rid") == rid) & F.col("invoke_index").isin(ids))
             .select("key", "offset", "value", "process", "index", "invoke_index").collect())
    return Evidence([tuple(r) for r in sends], [(r[0], r[1], r[2], r[3], r[4], 0, 0, r[5], False) for r in reads])

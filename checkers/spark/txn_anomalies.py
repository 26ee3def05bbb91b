"""The txn checker's reduction as Spark jobs over the Parquet tables: the same
definitions as checkers/txn/local.py (see its docstring), per run.

The findings that need no graph (G1a, precommitted-read, txn-lost-write,
txn-duplicate, txn-inconsistent-offsets) are flag rows of the one shared flag
job (checkers.spark.flags). The ww, wr and process edges and the transactions
are Spark jobs too; what the driver collects of them is integer columns
through Arrow. The components and the
cycle search then run on the driver with the in-process code
(checkers.txn.cycles: scipy's strongly connected components over the edges), so both engines search the same graph the same way.
GraphFrames was not tried (no time left in the session that wrote this): its
strongly connected components are GraphX's iterative algorithm, and the graph's
integer columns fit the driver; measuring it against this is left to do.
"""
from __future__ import annotations

import json
import threading

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.spark.flags import flag
from checkers.spark.tables import Tables
from checkers.txn.graph import FAIL, FINDINGS, INFO, OK, PROCESS, WR, WW, Graph, MAX_EXAMPLES

def _code():
    """The op's type as the graph's code (a function: pyspark 4 builds a column only
    with an active session, and this module is imported without one)."""
    return F.when(F.col("type") == "ok", OK).when(F.col("type") == "fail", FAIL).otherwise(INFO)


VALUE = ["rid", "k", "vid", "vtext"]


class Parts:
    """The DataFrames of one check (built once, shared by flags and check).

    Why this shape (measured, bench/txn_check.py; docs/performance.md): the sends and
    reads are read from Parquet once, hash-partitioned by `k` (run and key) and cached,
    so every later aggregation, join and window on a value (rid, k, vid, vtext), an
    offset (rid, k, offset) or a key runs on that partitioning without another shuffle
    (`spark.sql.requireAllClusterKeysForCoPartition` is off); only the per-transaction
    steps (rid, txn) and the process order shuffle. A history of few keys puts each
    key's rows in one task: the bench's histories have 1,000 keys.
    """

    _instances: dict[int, "Parts"] = {}
    _lock = threading.Lock()  # flags (the main thread) and check (its own) ask at once

    def __init__(self, tables: Tables) -> None:
        def keyed(frame):
            return frame.repartition(tables.width, "k")

        self.sends = tables._cache(keyed(tables.raw("sends").select(
            *VALUE, "key", "value", "offset", _code().alias("type"), "process",
            F.col("invoke_index").alias("txn"), "complete_index")))
        self.reads = tables._cache(keyed(tables.raw("reads").select(
            *VALUE, "key", "value", "offset", "process", F.col("invoke_index").alias("txn"),
            F.col("index").alias("complete_index"))))
        first = F.min(F.struct("txn", "type", "offset"))
        self.writers = tables._cache(self.sends.groupBy(*VALUE).agg(first.alias("w"), F.min("key").alias("key"),
                                                       F.min("value").alias("value"))
                        .select(*VALUE, "key", "value", F.col("w.txn").alias("w"), F.col("w.type").alias("wtype"),
                                F.when(F.col("w.type") == OK, F.col("w.offset")).alias("woffset")))
        self.read_values = self.reads.select(*VALUE).distinct()
        self.readers = self.reads.select(*VALUE, F.col("txn").alias("r")).distinct()
        txns = (self.sends.select("rid", "txn", "type", "process", "complete_index")
                .unionByName(self.reads.select("rid", "txn", F.lit(OK).alias("type"), "process",
                                               "complete_index")))
        # info transactions one of whose values was read: few rows (only info writers join),
        # broadcast to the transactions (a sort-merge join sorted every transaction: measured
        # the largest cached part)
        self.proven = (self.writers.where(F.col("wtype") == INFO).join(self.read_values, VALUE)
                       .select("rid", F.col("w").alias("txn")).distinct().withColumn("proven", F.lit(True)))
        self.txns = tables._cache(txns.groupBy("rid", "txn").agg(F.min("type").alias("type"), F.min("process").alias("process"),
                                                    F.max("complete_index").alias("complete"))
                     .join(F.broadcast(self.proven), ["rid", "txn"], "left")
                     .withColumn("proven", F.coalesce(F.col("proven"), F.lit(False)))
                     .withColumn("committed", (F.col("type") == OK) | F.col("proven")))
        self.pairs = tables._cache(self.reads.select(*VALUE, "key", "value", "offset")
                      .unionByName(self.sends.where((F.col("type") == OK) & F.col("offset").isNotNull())
                                   .join(self.writers.select(*VALUE, "w"), VALUE)
                                   .where(F.col("txn") == F.col("w")).select(*VALUE, "key", "value", "offset"))
                      .distinct())
        # values per offset: a count, not a list (a list per offset cost an object
        # aggregation over every pair; the lists are gathered for the few offsets with two)
        self.at_offset = self.pairs.groupBy("rid", "k", "offset").agg(F.count("*").alias("n"))

    @classmethod
    def of(cls, tables: Tables) -> "Parts":
        with cls._lock:
            if id(tables) not in cls._instances:
                cls._instances = {id(tables): cls(tables)}
            return cls._instances[id(tables)]


def flags(tables: Tables) -> list[DataFrame]:
    """The non-cycle findings as flag rows; sort columns as the in-process examples' `sort`."""
    parts = Parts.of(tables)
    shared = parts.at_offset.where(F.col("n") > 1).select("rid", "k", "offset")
    at_offset = parts.pairs.join(shared, ["rid", "k", "offset"]).groupBy("rid", "k", "key", "offset").agg(
        F.count("*").alias("n"), F.collect_list("value").alias("values"))
    inconsistent = flag(at_offset, "txn-inconsistent-offsets", ["key", "offset", "values"],
                        {"a": F.col("key"), "b": F.col("offset")})
    spread = (parts.pairs.groupBy(*VALUE).agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
              .where(F.col("lo") != F.col("hi")).select(*VALUE))
    by_value = parts.pairs.join(spread, VALUE).groupBy(*VALUE, "key").agg(
        F.min("value").alias("value"), F.collect_set("offset").alias("offsets"))
    duplicate = flag(by_value, "txn-duplicate", ["key", "value", "offsets"],
                     {"a": F.col("key"), "b": F.array_min("offsets")})
    read = parts.writers.join(parts.readers, VALUE)
    aborted = (read.where(F.col("wtype") == FAIL).groupBy(*VALUE, "key", "value", "w")
               .agg(F.slice(F.array_sort(F.collect_set("r")), 1, 9).alias("readers"))
               .withColumn("ops", F.concat(F.array("w"), F.col("readers"))))
    g1a = flag(aborted, "G1a", ["key", "value", "ops"], {"a": F.col("key"), "b": F.col("w")})
    own = (read.where((F.col("wtype") != FAIL) & (F.col("r") == F.col("w")))
           .groupBy("rid", "w", "key").agg(F.collect_list("value").alias("values"), F.min("k").alias("k")))
    lowest = Window.partitionBy("rid", "w").orderBy("key")
    own = (own.withColumn("_n", F.row_number().over(lowest)).where(F.col("_n") == 1)
           .withColumn("ops", F.array("w")))
    precommitted = flag(own, "precommitted-read", ["key", "values", "ops"], {"a": F.col("w"), "b": F.col("key")})
    max_read = parts.reads.groupBy("rid", "k").agg(F.max("offset").alias("max_read_offset"))
    ended = tables.ends.select("k", F.lit(True).alias("ended"))
    # committed writers: an ok writer's transaction is committed; only the others (few)
    # are joined with the transactions, broadcast (no sort of every transaction)
    unread = parts.writers.join(parts.read_values, VALUE, "left_anti")
    committed = parts.txns.where("committed").select("rid", F.col("txn").alias("w"))
    unread = (unread.where(F.col("wtype") == OK)
              .unionByName(committed.join(F.broadcast(unread.where(F.col("wtype") != OK)), ["rid", "w"]))
              .join(max_read, ["rid", "k"], "left").join(ended, "k", "left"))
    lost = F.when(F.col("woffset").isNotNull(),
                  F.coalesce(F.col("woffset") <= F.col("max_read_offset"), F.lit(False))) \
        .otherwise(F.coalesce(F.col("ended"), F.lit(False)))
    lost_write = flag(unread.where(lost).withColumn("offset", F.col("woffset")).withColumn("ops", F.array("w")),
                      "txn-lost-write", ["key", "value", "offset", "ops", "max_read_offset"],
                      {"a": F.col("key"), "b": F.col("w")})
    return [inconsistent, duplicate, g1a, precommitted, lost_write]


def edges(parts: Parts) -> DataFrame:
    """rid, src, dst, kind of every ww, wr and process edge (duplicates and self-edges are
    dropped by `Graph`, on the driver: a distinct here cost a shuffle of every edge)."""
    single = parts.pairs.join(parts.at_offset.where(F.col("n") == 1).select("rid", "k", "offset"),
                              ["rid", "k", "offset"])
    clean = single.groupBy(*VALUE).agg(F.min("offset").alias("offset"))
    ordered = clean.join(parts.writers.select(*VALUE, "w", "wtype"), VALUE, "left")
    in_key = Window.partitionBy("rid", "k").orderBy("offset")
    ww = (ordered.withColumn("pw", F.lag("w").over(in_key)).withColumn("pt", F.lag("wtype").over(in_key))
          .where(F.col("pw").isNotNull() & F.col("w").isNotNull() & (F.col("pt") != FAIL) & (F.col("wtype") != FAIL))
          .select("rid", F.col("pw").alias("src"), F.col("w").alias("dst"), F.lit(WW).alias("kind")))
    wr = (parts.writers.where(F.col("wtype") != FAIL).join(parts.readers, VALUE).where(F.col("r") != F.col("w"))
          .select("rid", F.col("w").alias("src"), F.col("r").alias("dst"), F.lit(WR).alias("kind")))
    graph_txns = parts.txns.where(F.col("type") != FAIL)
    in_process = Window.partitionBy("rid", "process").orderBy("txn")
    process = (graph_txns.withColumn("prev", F.lag("txn").over(in_process))
               .withColumn("pt", F.lag("type").over(in_process))
               .where(F.col("pt") == OK)
               .select("rid", F.col("prev").alias("src"), F.col("txn").alias("dst"), F.lit(PROCESS).alias("kind")))
    return ww.unionByName(wr).unionByName(process)


def check(job) -> dict:
    """{run: the txn checker's result}, searched and worded by the in-process code."""
    from checkers.txn import cycles
    from checkers.txn.explain import Evidence, cycle_transactions
    from checkers.txn.result import summarize

    parts = Parts.of(job.tables)
    nodes = (parts.txns.where(F.col("type") != FAIL)
             .select("rid", "txn", F.when(F.col("type") == OK, F.col("complete")).otherwise(-1).alias("complete"))
             .toArrow())
    links = edges(parts).toArrow()
    counts = {row["rid"]: row for row in parts.txns.groupBy("rid").agg(
        F.sum(F.col("committed").cast("int")).alias("committed"),
        F.sum((F.col("type") == FAIL).cast("int")).alias("aborted"),
        F.sum(((F.col("type") == INFO) & ~F.col("proven")).cast("int")).alias("indefinite")).collect()}
    top = job.top()
    node_rid, node_ids, node_complete = (np.asarray(nodes.column(c).to_numpy(zero_copy_only=False), dtype=np.int64)
                                         for c in ("rid", "txn", "complete"))
    link = {c: np.asarray(links.column(c).to_numpy(zero_copy_only=False), dtype=np.int64)
            for c in ("rid", "src", "dst", "kind")}
    out = {}
    for rid, run in enumerate(job.runs):
        mine = node_rid == rid
        order = np.argsort(node_ids[mine], kind="stable")
        here = link["rid"] == rid
        graph = Graph(node_ids[mine][order], node_complete[mine][order],
                      np.stack([link["src"][here], link["dst"][here], link["kind"][here]], axis=1),
                      {name: _finding(name, top.get((run, name))) for name in FINDINGS},
                      {name: int((counts.get(rid) or {name: 0})[name] or 0)
                       for name in ("committed", "aborted", "indefinite")})
        found = cycles.search(graph)
        out[run] = summarize(graph, found, _evidence(parts, rid, cycle_transactions(found.cycles)))
    return out


def _finding(name: str, flagged) -> tuple[int, list]:
    """A flag job's (count, payloads) -> (count, examples) as the in-process code lists them."""
    from history.flatten import decode_value

    if not flagged:
        return 0, []
    count, payloads = flagged
    examples = []
    for payload in payloads[:MAX_EXAMPLES]:
        example = dict(payload)
        if "value" in example:
            example["value"] = decode_value(example["value"])
        if name == "txn-inconsistent-offsets":
            example["values"] = sorted(decode_value(v) for v in set(example["values"]))
        if name == "txn-duplicate":
            example["offsets"] = sorted(example["offsets"])
        if name == "precommitted-read":
            example["values"] = sorted(decode_value(v) for v in example["values"])
        examples.append(example)
    return int(count), examples


def _evidence(parts: Parts, rid: int, wanted: set[int]):
    """The flat rows of a few transactions of one run (one small job each table)."""
    from checkers.txn.explain import Evidence

    if not wanted:
        return Evidence([], [])
    ids = sorted(wanted)
    names = {OK: "ok", FAIL: "fail", INFO: "info"}
    sends = (parts.sends.where((F.col("rid") == rid) & F.col("txn").isin(ids))
             .select("key", "value", "offset", "type", "process", "txn", "complete_index").collect())
    reads = (parts.reads.where((F.col("rid") == rid) & F.col("txn").isin(ids))
             .select("key", "offset", "value", "process", "complete_index", "txn").collect())
    return Evidence([(r[0], r[1], r[2], names[r[3]], r[4], r[5], r[6]) for r in sends],
                    [(r[0], r[1], r[2], r[3], r[4], 0, 0, r[5], False) for r in reads])

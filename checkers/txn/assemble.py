"""The txn checker's second step: every key's facts (checkers.txn.keys) put
together into one run's `Graph`, the same code in both engines.

Here is what needs more than one key: a transaction's type and completion
(its rows may be in many keys, so in many Spark tasks), whether it committed
(an `info` one is proven by any of its values read), the process order, the
lowest key of a precommitted read, and the findings' counts and examples,
ordered as Jepsen's checker would list them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from checkers.txn.graph import FAIL, FINDINGS, INFO, MAX_EXAMPLES, OK, PROCESS, WR, WW, Graph
from checkers.txn.keys import KeyFacts

# (key, vt, v) of the values the examples name -> their decoded values (one call per run)
Decode = Callable[[list[tuple[int, int, int]]], dict]


def assemble(facts: KeyFacts, decode: Decode, key_name: Callable[[int], int] = int) -> Graph:
    """One run's Graph. key_name: a key as the examples name it (Spark: the key of a k)."""
    nodes = facts.nodes
    if nodes["txn"].duplicated().any():  # the same transaction seen by several tasks
        nodes = nodes.groupby("txn", sort=False).agg(t=("t", "min"), p=("p", "first"),
                                                      complete=("complete", "max")).reset_index()
    nodes = nodes.sort_values("txn", kind="stable")
    txn, t = nodes["txn"].to_numpy(np.int64), nodes["t"].to_numpy()
    proven = np.isin(txn, facts.proven) & (t == INFO)
    committed = (t == OK) | proven
    counts = {"committed": int(committed.sum()), "aborted": int((t == FAIL).sum()),
              "indefinite": int(((t == INFO) & ~proven).sum())}

    refs: list[tuple[int, int, int]] = []   # values to decode, in the order examples name them
    findings = {name: (0, []) for name in FINDINGS}

    def value(key, vt, v):
        refs.append((int(key), int(vt), int(v)))
        return refs[-1]

    bad = facts.inconsistent
    if len(bad):
        groups = bad.groupby(["key", "offset"])[["vt", "v"]].apply(lambda g: list(zip(g["vt"], g["v"])))
        findings["txn-inconsistent-offsets"] = (len(groups), [
            {"key": key, "offset": int(o), "values": [value(key, vt, v) for vt, v in vs]}
            for (key, o), vs in groups.sort_index().iloc[:MAX_EXAMPLES].items()])
    dup = facts.duplicate
    if len(dup):
        spans = dup.groupby(["key", "vt", "v"])["offset"].agg(["min", list]).reset_index()
        spans = spans.sort_values(["key", "min", "vt", "v"], kind="stable")
        findings["txn-duplicate"] = (len(spans), [
            {"key": key, "value": value(key, vt, v), "offsets": sorted(int(o) for o in offs)}
            for key, vt, v, offs in zip(*(spans[c].iloc[:MAX_EXAMPLES] for c in ("key", "vt", "v", "list")))])
    aborted = facts.aborted_reads
    if len(aborted):
        groups = aborted.groupby(["key", "w", "vt", "v"])["r"].agg(lambda rs: sorted(rs)[:9]).sort_index()
        findings["G1a"] = (len(groups), [
            {"key": key, "value": value(key, vt, v), "ops": [int(w)] + [int(r) for r in rs]}
            for (key, w, vt, v), rs in groups.iloc[:MAX_EXAMPLES].items()])
    own = facts.own_reads
    if len(own):
        firsts = own[own["key"].to_numpy() == own.groupby("w")["key"].transform("min").to_numpy()]
        groups = firsts.groupby(["w", "key"])[["vt", "v"]].apply(lambda g: list(zip(g["vt"], g["v"])))
        findings["precommitted-read"] = (len(groups), [
            {"key": key, "values": [value(key, vt, v) for vt, v in vs], "ops": [int(w)]}
            for (w, key), vs in groups.sort_index().iloc[:MAX_EXAMPLES].items()])
    lost = facts.unread
    lost = lost[(lost["t"].to_numpy() == OK) | np.isin(lost["w"].to_numpy(), txn[proven])]
    if len(lost):
        lost = lost.sort_values(["key", "w", "vt", "v"], kind="stable")
        reached = dict(zip(facts.max_read["key"], facts.max_read["offset"]))
        findings["txn-lost-write"] = (len(lost), [
            {"key": key, "value": value(key, vt, v), "offset": None if np.isnan(o) else int(o),
             "ops": [int(w)], "max_read_offset": int(reached[key]) if key in reached else None}
            for key, vt, v, o, w in zip(*(lost[c].iloc[:MAX_EXAMPLES] for c in ("key", "vt", "v", "offset", "w")))])

    decoded = decode(list(dict.fromkeys(refs))) if refs else {}
    for name, (count, examples) in findings.items():
        for example in examples:
            for field in ("value", "values"):
                if field in example:
                    example[field] = (decoded[example[field]] if field == "value"
                                      else sorted(decoded[ref] for ref in example[field]))
            example["key"] = key_name(example["key"])

    in_graph = t != FAIL
    G = nodes[in_graph].sort_values(["p", "txn"], kind="stable")
    same = G["p"].to_numpy()[1:] == G["p"].to_numpy()[:-1]
    after_ok = same & (G["t"].to_numpy()[:-1] == OK)
    ids_sorted = G["txn"].to_numpy(np.int64)
    process = np.stack([ids_sorted[:-1][after_ok], ids_sorted[1:][after_ok]], axis=1)
    edges = np.concatenate([_kind(facts.ww, WW), _kind(facts.wr, WR), _kind(process, PROCESS)])
    complete = np.where(t[in_graph] == OK, nodes["complete"].to_numpy(np.int64)[in_graph], -1)
    return Graph(txn[in_graph], complete, edges, findings, counts)


def _kind(pairs: np.ndarray, kind: int) -> np.ndarray:
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return np.concatenate([pairs, np.full((len(pairs), 1), kind, dtype=np.int64)], axis=1)


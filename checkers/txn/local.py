"""The in-process reduction of flat rows (history.flatten) to a `Graph`.

Definitions (checkers/spark/txn_anomalies.py computes the same ones as Spark jobs):

- a transaction's sends are *committed* when it is `ok`, or `info` and one of
  its values was read (Jepsen's `must-have-committed?`: a transaction is atomic,
  so one value seen means all were committed); a value sent twice belongs to
  its first sender (the lowest invocation index);
- pairs (key, offset, value) come from every ok poll and from the committed
  sends with a known offset; an offset with two values is `txn-inconsistent-offsets`,
  a value at two offsets a `txn-duplicate`;
- a key's version order: its offsets with one value, each value at its lowest
  offset; ww links the writers of consecutive values;
- wr links a value's writer to each transaction that read it; a read of a
  value its own transaction sent is `precommitted-read` (no edge), a read of a
  value whose transaction failed is `G1a`;
- process links consecutive graph transactions of one process when the
  earlier one completed `ok` (an `info` retires its process);
- `txn-lost-write`: a committed send never read although the key was read at or
  past its offset, or, its offset unknown (an indefinite transaction proven
  committed by a sibling value), although the key was read to its end in the
  final phase.

Written as pandas column operations (joins and group-bys in C), the same
relational steps as the Spark driver: on a 100k-transaction synthetic history
(bench/engines/txn_synthetic.write_tables) it took 1.0-1.1 CPU-s where the
dict-per-row version it replaced took 2.2-2.8 (same graph, same findings; on a
shared, loaded machine, 2026-11-28).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from history.flatten import READ_COLUMNS, SEND_COLUMNS, decode_value
from checkers.txn.graph import FAIL, FINDINGS, INFO, MAX_EXAMPLES, OK, PROCESS, WR, WW, Graph

KV = ["key", "v"]


def reduce(sends: list[tuple], reads: list[tuple], ends: list[tuple]) -> Graph:
    """Flat send / read / end rows -> the Graph of their transactions."""
    S = pd.DataFrame.from_records(sends, columns=SEND_COLUMNS) if sends else pd.DataFrame(columns=SEND_COLUMNS)
    R = pd.DataFrame.from_records(reads, columns=READ_COLUMNS) if reads else pd.DataFrame(columns=READ_COLUMNS)
    codes, texts = pd.factorize(pd.concat([S["value"], R["value"]], ignore_index=True))
    S = pd.DataFrame({"key": S["key"].to_numpy(np.int64), "v": codes[:len(S)],
                      "offset": pd.to_numeric(S["offset"]).to_numpy(np.float64),
                      "t": np.select([S["type"].to_numpy() == "ok", S["type"].to_numpy() == "fail"], [OK, FAIL], INFO),
                      "process": S["process"].astype(str).to_numpy(), "txn": S["invoke_index"].to_numpy(np.int64),
                      "complete": pd.to_numeric(S["complete_index"]).fillna(-1).to_numpy(np.int64)})
    R = pd.DataFrame({"key": R["key"].to_numpy(np.int64), "v": codes[len(S):],
                      "offset": R["offset"].to_numpy(np.int64), "process": R["process"].astype(str).to_numpy(),
                      "txn": R["invoke_index"].to_numpy(np.int64), "complete": R["index"].to_numpy(np.int64)})

    W = (S.sort_values("txn", kind="stable").drop_duplicates(KV, keep="first")
         [["key", "v", "txn", "t", "offset"]].rename(columns={"txn": "w"}))
    W.loc[W["t"] != OK, "offset"] = np.nan
    RV = R[KV].drop_duplicates()
    T = (pd.concat([S[["txn", "t", "process", "complete"]],
                    R[["txn", "process", "complete"]].assign(t=OK)], ignore_index=True)
         .groupby("txn", sort=True).agg(t=("t", "min"), process=("process", "first"), complete=("complete", "max")))
    proven_ids = W[W["t"] == INFO].merge(RV, on=KV)["w"].unique()
    T["proven"] = T.index.isin(proven_ids)
    T["committed"] = (T["t"] == OK) | T["proven"]

    P = pd.concat([R[["key", "offset", "v"]],
                   W.loc[W["offset"].notna(), ["key", "offset", "v"]].astype({"offset": np.int64})],
                  ignore_index=True).drop_duplicates()
    findings = {name: (0, []) for name in FINDINGS}
    at_offset = P.groupby(["key", "offset"])["v"].transform("size")
    bad = P[at_offset > 1]
    if len(bad):
        groups = bad.groupby(["key", "offset"])["v"].agg(list).sort_index()
        findings["txn-inconsistent-offsets"] = (len(groups), [
            {"key": int(k), "offset": int(o), "values": sorted(decode_value(texts[v]) for v in vs)}
            for (k, o), vs in groups.iloc[:MAX_EXAMPLES].items()])
    offsets_of = P.groupby(KV)["offset"].agg(["nunique", "min"])
    dup = offsets_of[offsets_of["nunique"] > 1].reset_index().sort_values(["key", "min"])
    if len(dup):
        top = dup.iloc[:MAX_EXAMPLES]
        findings["txn-duplicate"] = (len(dup), [
            {"key": int(k), "value": decode_value(texts[v]), "offsets": sorted(int(o) for o in P.loc[
                (P["key"] == k) & (P["v"] == v), "offset"])} for k, v in zip(top["key"], top["v"])])

    clean = (P[at_offset == 1].groupby(KV, as_index=False)["offset"].min()
             .sort_values(["key", "offset"]).merge(W[["key", "v", "w", "t"]], on=KV, how="left", sort=False))
    clean = clean.sort_values(["key", "offset"], kind="stable")
    k, w, t = clean["key"].to_numpy(), clean["w"].to_numpy(np.float64), clean["t"].to_numpy(np.float64)
    follows = (k[1:] == k[:-1]) & ~np.isnan(w[1:]) & ~np.isnan(w[:-1]) & (t[1:] != FAIL) & (t[:-1] != FAIL)
    ww = np.stack([w[:-1][follows], w[1:][follows], np.full(int(follows.sum()), WW)], axis=1).astype(np.int64)

    readers = R[["key", "v", "txn"]].drop_duplicates().rename(columns={"txn": "r"})
    read = readers.merge(W[["key", "v", "w", "t"]], on=KV)
    aborted = read[read["t"] == FAIL]
    if len(aborted):
        groups = aborted.groupby(["key", "w", "v"])["r"].agg(lambda rs: sorted(rs)[:9]).sort_index()
        findings["G1a"] = (len(groups), [
            {"key": int(key), "value": decode_value(texts[v]), "ops": [int(w_)] + [int(r) for r in rs]}
            for (key, w_, v), rs in groups.iloc[:MAX_EXAMPLES].items()])
    own = read[(read["t"] != FAIL) & (read["r"] == read["w"])]
    if len(own):
        lowest = own.groupby("w")["key"].min()
        firsts = own.merge(lowest.rename("first").reset_index(), on="w")
        firsts = firsts[firsts["key"] == firsts["first"]]
        groups = firsts.groupby(["w", "key"])["v"].agg(list).sort_index()
        findings["precommitted-read"] = (len(groups), [
            {"key": int(key), "values": sorted(decode_value(texts[v]) for v in vs), "ops": [int(w_)]}
            for (w_, key), vs in groups.iloc[:MAX_EXAMPLES].items()])
    flows = read[(read["t"] != FAIL) & (read["r"] != read["w"])]
    wr = np.stack([flows["w"].to_numpy(np.int64), flows["r"].to_numpy(np.int64),
                   np.full(len(flows), WR, dtype=np.int64)], axis=1)

    max_read = R.groupby("key")["offset"].max()
    ended = {row[0] for row in ends}
    sent = W.merge(RV.assign(seen=True), on=KV, how="left")
    sent = sent[sent["seen"].isna() & sent["w"].isin(T.index[T["committed"]])]
    reached = sent["key"].map(max_read)
    lost = sent[np.where(sent["offset"].notna(), sent["offset"] <= reached.fillna(-1),
                         sent["key"].isin(ended))].sort_values(["key", "w"])
    if len(lost):
        findings["txn-lost-write"] = (len(lost), [
            {"key": int(key), "value": decode_value(texts[v]), "offset": None if np.isnan(o) else int(o),
             "ops": [int(w_)], "max_read_offset": None if key not in max_read.index else int(max_read[key])}
            for key, v, o, w_ in zip(*(lost[c].iloc[:MAX_EXAMPLES] for c in ("key", "v", "offset", "w")))])

    G = T[T["t"] != FAIL].reset_index().sort_values(["process", "txn"], kind="stable")
    same = G["process"].to_numpy()[1:] == G["process"].to_numpy()[:-1]
    after_ok = same & (G["t"].to_numpy()[:-1] == OK)
    ids_sorted = G["txn"].to_numpy(np.int64)
    process = np.stack([ids_sorted[:-1][after_ok], ids_sorted[1:][after_ok],
                        np.full(int(after_ok.sum()), PROCESS, dtype=np.int64)], axis=1)

    nodes = T[T["t"] != FAIL]
    ids = nodes.index.to_numpy(np.int64)
    complete = np.where(nodes["t"].to_numpy() == OK, nodes["complete"].to_numpy(np.int64), -1)
    counts = {"committed": int(T["committed"].sum()), "aborted": int((T["t"] == FAIL).sum()),
              "indefinite": int(((T["t"] == INFO) & ~T["proven"]).sum())}
    return Graph(ids, complete, np.concatenate([ww, wr, process]), findings, counts)

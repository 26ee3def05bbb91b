"""What each key's sends and polls say about transactions: the first of the txn
checker's two steps, the same code in both engines.

The in-process engine runs it once over every row; the Spark engine runs it in
each task over the rows of the keys hash-partitioned to it (a key's rows are
all in one task), so nothing here needs another key's rows. What does
(whether a transaction committed, its process order, which key of a
transaction is the lowest) is left to `checkers.txn.assemble`, which gets
these facts from every task.

Definitions (Jepsen's Kafka queue checker, after Elle):

- a value sent twice belongs to its first sender (the lowest invocation
  index); a transaction's sends are *committed* when it is `ok`, or `info` and
  one of its values was read (`must-have-committed?`: one value seen means all
  were committed; here: `proven`);
- pairs (key, offset, value) come from every ok poll and from the ok sends
  with a known offset; an offset with two values is `txn-inconsistent-offsets`,
  a value at two offsets a `txn-duplicate`;
- a key's version order: its offsets with one value, each value at its lowest
  offset; ww links the writers of consecutive values;
- wr links a value's writer to each transaction that read it; a read of a
  value its own transaction sent is `precommitted-read` (no edge), a read of a
  value whose transaction failed is `G1a`;
- `txn-lost-write`: a committed send never read although the key was read at
  or past its offset, or read to its end in the final phase (with its offset
  known or not: an indefinite transaction proven committed by a sibling value).

Rows are pandas frames of integer columns. A value is (vt, v): vt 0 is a
canonical integer text and v the integer; vt 1 is any other text, v a number
naming it (the in-process engine: its position among the run's texts; Spark:
its 64-bit xxhash, checkers.spark.tables). Transaction ids are opaque int64
(Spark puts the run in the high bits), keys too (Spark's k).

Sends S: key, vt, v, offset (float, NaN unknown), t (OK / FAIL / INFO), p (the
process, as a number), txn (invocation index), complete (-1 unknown).
Reads R: key, vt, v, offset, p, txn, complete.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from checkers.txn.graph import FAIL, INFO, OK

KV = ["key", "vt", "v"]
SEND_FRAME = ("key", "vt", "v", "offset", "t", "p", "txn", "complete")
READ_FRAME = ("key", "vt", "v", "offset", "p", "txn", "complete")


@dataclass
class KeyFacts:
    """One task's (or the whole history's) per-key findings; frames of int64 columns."""

    ww: np.ndarray             # [n, 2] writer of a value, writer of the next one in its key
    wr: np.ndarray             # [n, 2] writer of a value, a transaction that read it
    nodes: pd.DataFrame        # txn, t (lowest), p, complete (highest): each transaction seen
    proven: np.ndarray         # info transactions one of whose values was read
    inconsistent: pd.DataFrame  # key, offset, vt, v: every pair at an offset with two values
    duplicate: pd.DataFrame    # key, vt, v, offset: every pair of a value at two offsets
    aborted_reads: pd.DataFrame  # key, w, vt, v, r: reads of a failed transaction's value
    own_reads: pd.DataFrame    # w, key, vt, v: reads of a value the reader itself sent
    unread: pd.DataFrame       # key, vt, v, offset, w, t: lost if its writer committed
    max_read: pd.DataFrame     # key, offset: the highest read offset of each key in `unread`


def key_facts(S: pd.DataFrame, R: pd.DataFrame, ended) -> KeyFacts:
    """The facts of the keys of S and R. ended: keys read to their end in the final phase."""
    W = (S.sort_values("txn", kind="stable").drop_duplicates(KV, keep="first")
         [["key", "vt", "v", "txn", "t", "offset"]].rename(columns={"txn": "w"}))
    W.loc[W["t"].to_numpy() != OK, "offset"] = np.nan
    RV = R[KV].drop_duplicates()
    proven = W[W["t"] == INFO].merge(RV, on=KV)["w"].unique()
    nodes = (pd.concat([S[["txn", "t", "p", "complete"]], R[["txn", "p", "complete"]].assign(t=OK)],
                       ignore_index=True)
             .groupby("txn", sort=False).agg(t=("t", "min"), p=("p", "first"), complete=("complete", "max"))
             .reset_index())

    known = W["offset"].notna().to_numpy()
    P = pd.concat([R[["key", "offset", "vt", "v"]],
                   W.loc[known, ["key", "offset", "vt", "v"]].astype({"offset": np.int64})],
                  ignore_index=True).drop_duplicates()
    at_offset = P.groupby(["key", "offset"])["v"].transform("size").to_numpy()
    spread = P.groupby(KV)["offset"].transform("nunique").to_numpy()

    clean = (P[at_offset == 1].groupby(KV, as_index=False)["offset"].min()
             .merge(W[["key", "vt", "v", "w", "t"]], on=KV, how="left", sort=False)
             .sort_values(["key", "offset"], kind="stable"))
    k, w, t = clean["key"].to_numpy(), clean["w"].to_numpy(np.float64), clean["t"].to_numpy(np.float64)
    follows = (k[1:] == k[:-1]) & ~np.isnan(w[1:]) & ~np.isnan(w[:-1]) & (t[1:] != FAIL) & (t[:-1] != FAIL)
    ww = np.stack([w[:-1][follows], w[1:][follows]], axis=1).astype(np.int64)

    readers = R[["key", "vt", "v", "txn"]].drop_duplicates().rename(columns={"txn": "r"})
    read = readers.merge(W[["key", "vt", "v", "w", "t"]], on=KV)
    rt, rr, rw = read["t"].to_numpy(), read["r"].to_numpy(), read["w"].to_numpy()
    flows = (rt != FAIL) & (rr != rw)
    wr = np.stack([rw[flows], rr[flows]], axis=1).astype(np.int64)

    sent = W.merge(RV.assign(seen=True), on=KV, how="left")
    sent = sent[sent["seen"].isna().to_numpy() & (sent["t"].to_numpy() != FAIL)]
    max_read = R.groupby("key")["offset"].max()
    reached = sent["key"].map(max_read).fillna(-1).to_numpy()
    offset = sent["offset"].to_numpy()
    # read to its end in the final phase: every committed send's offset is below that end (its
    # commit marker follows it), even where the read's last record is not past it (a
    # read_committed read skips aborted records and markers, so its last record can be older)
    read_out = sent["key"].isin(ended).to_numpy()
    lost = np.where(~np.isnan(offset), (offset <= reached) | read_out, read_out)
    unread = sent[lost][["key", "vt", "v", "offset", "w", "t"]]
    max_read = max_read[max_read.index.isin(unread["key"])].rename("offset").reset_index()
    return KeyFacts(ww, wr, nodes, proven, P[at_offset > 1], P[spread > 1][["key", "vt", "v", "offset"]],
                    read[rt == FAIL][["key", "w", "vt", "v", "r"]],
                    read[(rt != FAIL) & (rr == rw)][["w", "key", "vt", "v"]], unread, max_read)

"""What both engines reduce a transactional history to: the transactions that
take part in the dependency graph, their ww / wr / process edges, and the
findings that need no cycle search.

A transaction is one op (a `txn`, or a lone `send` or `poll`), named by the
history index of its invocation (`invoke_index` of its flat rows). Those in
the graph are the `ok` and `info` ones (Elle's rule: a failed op took no
effect; an indefinite one may have). Real-time order is not listed as edges:
`checkers.txn.cycles` derives it from each transaction's completion.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

WW, WR, PROCESS, REALTIME = 0, 1, 2, 3
EDGE_NAMES = {WW: "ww", WR: "wr", PROCESS: "process", REALTIME: "realtime"}
OK, FAIL, INFO = 0, 1, 2  # type codes, as in the flat rows' order of checkers.spark.tables

# The findings that need no cycle search, in vocabulary order; each example is a dict
# whose `sort` tuple of integers orders it the same way in both engines.
FINDINGS = ("G1a", "precommitted-read", "txn-lost-write", "txn-duplicate", "txn-inconsistent-offsets")
MAX_EXAMPLES = 20


@dataclass
class Graph:
    """Transactions (sorted by id) and edges between them, as integer arrays."""

    ids: np.ndarray         # int64: invoke index of each transaction in the graph
    complete: np.ndarray    # int64: completion index of an ok transaction; -1 for info
    edges: np.ndarray       # int64 [n, 3]: src id, dst id, kind (WW / WR / PROCESS); may repeat
    findings: dict = field(default_factory=dict)  # name -> (count, examples)
    counts: dict = field(default_factory=dict)    # committed / aborted / indefinite

    def node(self, ids: np.ndarray) -> np.ndarray:
        """Positions of transaction ids in `ids`: a gather from a table by id when the ids
        are dense (invocation indexes are: 3x faster than a binary search of 25M edges
        among 8M transactions), else a binary search."""
        if len(self.ids) and 0 <= self.ids[0] and self.ids[-1] < 4 * len(self.ids) + (1 << 20):
            table = np.zeros(int(self.ids[-1]) + 1, dtype=np.int64)
            table[self.ids] = np.arange(len(self.ids))
            return table[ids]
        return np.searchsorted(self.ids, ids)


def unique_edges(edges) -> np.ndarray:
    """Sorted distinct (src, dst, kind) rows without self-edges: one form for both engines."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 3)
    edges = edges[edges[:, 0] != edges[:, 1]]
    if not len(edges):
        return edges
    if edges[:, :2].min() >= 0 and edges[:, :2].max() < 1 << 30:  # one int64 per edge: a 1-d sort
        # a sort and a compare, not np.unique: numpy 2.4's hash-based unique took 1.5 s
        # for 2.5M codes where this takes 0.15 (1M-transaction bench history)
        code = np.sort((edges[:, 0] << 32) | (edges[:, 1] << 2) | edges[:, 2])
        code = code[np.concatenate([[True], code[1:] != code[:-1]])]
        return np.stack([code >> 32, (code >> 2) & ((1 << 30) - 1), code & 3], axis=1)
    return np.unique(edges, axis=0)


def top_examples(examples: list[dict]) -> list[dict]:
    """The first MAX_EXAMPLES by their `sort` key, without it."""
    examples = sorted(examples, key=lambda e: e["sort"])[:MAX_EXAMPLES]
    return [{k: v for k, v in e.items() if k != "sort"} for e in examples]

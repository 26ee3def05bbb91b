"""Cycles in the dependency graph: strongly connected components, then a shortest
cycle of each kind per component, each search under a time cap.

Kinds (Elle's names, as Jepsen's Kafka checker reports them) and the edges a
cycle of that kind may use; it must use at least one of the marked kind:

    G0            ww*                     G1c            wr*
    G0-process    ww, process*            G1c-process    wr, process*
    G0-realtime   ww, process, realtime*  G1c-realtime   wr, process, realtime*

G1c cycles leave ww edges out, as Jepsen's checker does by default (without
`:ww-deps`): Kafka does not isolate writes, so a cycle mixing ww and wr is
what interleaved transactions make normally. G0 cycles are reported and
allowed, as Jepsen allows them (`allowed-error-types`). As in Elle, the kinds of
a family are tried in this order and a component with a cycle of one kind is
not searched for the later ones of its family (Elle: the later are implied). A process edge implies
real-time order, and both are acyclic alone, so every G1c-* cycle has a wr edge
and every G0-* cycle a ww edge.

Real-time order as edges would be n * concurrency of them. Instead, one
*time node* per ok completion, chained in completion order: T -> t(T) (the
edge that counts), t_j -> t_j+1 and t_j -> U for the last completion t_j
before U's invocation (free: weight 0). T reaches U through time nodes iff T
completed before U was invoked: real-time order with O(n) edges, and a
shortest cycle is a 0-1 BFS.

Components: scipy.sparse.csgraph (C, one call over the whole graph). Measured
with bench/txn_check.py --scc (its scc_times) on the graph of a 100k-transaction
synthetic history (166k nodes with the time nodes, 500k edges), 2026-11-28, on a
shared machine (load average ~30 on 2 cores): scipy 0.68 s, rustworkx 8.9 s
(building its graph from Python lists included), networkx 48.6 s; the same
components from all three.

Time cap: each component of the G1c graph (wr, process, real time) gets
`cap` seconds for its searches; a component whose time runs out before each
kind was searched in it is listed in `unchecked` with its size, and the
verdict is unknown unless something else made it invalid. The G0 searches
(allowed kinds) have their own caps, and an expired one is only noted.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from checkers.txn.graph import PROCESS, REALTIME, WR, WW, Graph, unique_edges

RT_OUT, CHAIN, RT_IN = 3, 4, 5      # real time through time nodes (RT_OUT is REALTIME)
FREE = (CHAIN, RT_IN)               # weight 0
KINDS = {  # name -> (edge kinds it may use, the kind it must use)
    "G0": ((WW,), WW),
    "G0-process": ((WW, PROCESS), PROCESS),
    "G0-realtime": ((WW, PROCESS, RT_OUT, CHAIN, RT_IN), RT_OUT),
    "G1c": ((WR,), WR),
    "G1c-process": ((WR, PROCESS), PROCESS),
    "G1c-realtime": ((WR, PROCESS, RT_OUT, CHAIN, RT_IN), RT_OUT),
}
ALLOWED = ("G0", "G0-process", "G0-realtime")  # Kafka's model allows them (writes are not isolated)
FAMILIES = {"G0": ("G0", "G0-process", "G0-realtime"), "G1c": ("G1c", "G1c-process", "G1c-realtime")}
CAP_S = 10.0      # seconds per component
MAX_TRIES = 64    # marked edges tried per kind and component (the shortest of them is kept)
MAX_CYCLES = 8    # cycles kept per kind (Jepsen's report keeps 8)


@dataclass
class Cycle:
    kind: str
    component: int            # transactions in its component (of the kind's family graph)
    steps: list               # [(transaction id, edge kind to the next one)], the last edge closes it


@dataclass
class Found:
    counts: dict = field(default_factory=dict)       # kind -> components with a cycle of that kind
    cycles: list = field(default_factory=list)       # Cycle, up to MAX_CYCLES per kind
    unchecked: list = field(default_factory=list)    # {"family", "transactions"} of expired components


def search(graph: Graph, cap: float = CAP_S, tries: int = MAX_TRIES) -> Found:
    """Every kind's cycles in `graph`, one (a shortest found) per component."""
    src, dst, kind = _all_edges(graph)
    n, total, src, dst, kind, original = _cyclic_part(len(graph.ids), src, dst, kind)
    found = Found(counts={name: 0 for name in KINDS})
    for family, names in FAMILIES.items():
        top_kinds = KINDS[names[-1]][0]
        top = _labels(total, src, dst, kind, top_kinds)
        sizes = np.bincount(top[:n], minlength=top.max() + 1) if n else np.zeros(0, dtype=np.int64)
        if not len(sizes) or sizes.max() < 2:  # no component of two transactions: no cycle of the family
            continue
        budget: dict[int, float] = {}
        expired: set[int] = set()
        done: set[int] = set()  # components with a cycle of an earlier kind of the family
        for name in names:
            allowed, marked = KINDS[name]
            labels = top if allowed == top_kinds else _labels(total, src, dst, kind, allowed)
            inside = (kind == marked) & (labels[src] == labels[dst]) & (sizes[top[src]] > 1)
            if not inside.any():
                continue
            adjacency = _adjacency(len(labels), src, dst, kind, allowed)
            groups: dict[int, list] = {}
            for u, v in zip(src[inside].tolist(), dst[inside].tolist()):
                groups.setdefault(int(labels[u]), []).append((u, v))
            for label, candidates in sorted(groups.items(), key=lambda g: min(g[1])):
                component = int(top[candidates[0][0]])
                if component in expired or component in done:
                    continue
                started = time.monotonic()
                deadline = started + cap - budget.get(component, 0.0)
                best = None
                for u, v in candidates[:tries]:
                    if time.monotonic() >= deadline:
                        break
                    path = _shortest_path(adjacency, labels, label, v, u, deadline)
                    if path is None:  # out of time
                        break
                    if best is None or _length(path) < _length(best):
                        best = path
                    if time.monotonic() > deadline:
                        break
                budget[component] = budget.get(component, 0.0) + time.monotonic() - started
                if best is None:
                    expired.add(component)
                    continue
                found.counts[name] += 1
                done.add(component)
                if sum(1 for c in found.cycles if c.kind == name) < MAX_CYCLES:
                    found.cycles.append(Cycle(name, int(sizes[component]), _steps(graph, best, marked, n, original)))
        found.unchecked.extend({"family": family, "transactions": int(sizes[c])} for c in sorted(expired))
    return found


def _all_edges(graph: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions (src, dst, kind) of the graph's edges plus the time nodes' edges."""
    n = len(graph.ids)
    edges = graph.edges
    src, dst = graph.node(edges[:, 0]), graph.node(edges[:, 1])
    ok = np.flatnonzero(graph.complete >= 0)
    ok = ok[np.argsort(graph.complete[ok], kind="stable")]
    times = graph.complete[ok]
    m = len(ok)
    chain = np.arange(n, n + m, dtype=np.int64)
    last = np.searchsorted(times, graph.ids, side="left") - 1  # last completion before each invocation
    into = np.flatnonzero(last >= 0)
    src = np.concatenate([src, ok, chain[:-1], n + last[into]])
    dst = np.concatenate([dst, chain, chain[1:], into])
    kind = np.concatenate([edges[:, 2], np.full(m, RT_OUT), np.full(max(m - 1, 0), CHAIN),
                           np.full(len(into), RT_IN)]).astype(np.int8)
    return src.astype(np.int64), dst.astype(np.int64), kind


def _cyclic_part(n: int, src, dst, kind):
    """(transactions, nodes, src, dst, kind, original position of each node) of the part of
    the graph that can hold a cycle: the nodes of strong components (over every edge kind)
    of two or more nodes, and the edges inside them. Every cycle of every kind lies there,
    so the searches below run on it alone: in a history without anomalies it is nearly
    empty (10M-transaction bench history: 8 label passes over 16M nodes and 49M edges
    were most of the search). Positions keep their order, transactions before time nodes."""
    total = n + int((kind == RT_OUT).sum())
    labels = _labels(total, src, dst, kind, tuple(range(6)))
    if not total:
        return n, total, src, dst, kind, np.arange(0, dtype=np.int64)
    keep = np.bincount(labels)[labels] > 1
    original = np.flatnonzero(keep)
    position = np.full(total, -1, dtype=np.int64)
    position[original] = np.arange(len(original))
    inside = keep[src] & keep[dst] & (labels[src] == labels[dst])
    src, dst, kind = position[src[inside]], position[dst[inside]], kind[inside]
    # the graph's own edges sorted and without repeats (the searches' order), then the time
    # edges in the order they were made
    own = kind < RT_OUT
    code = unique_edges(np.stack([src[own], dst[own], kind[own]], axis=1))
    return (int(keep[:n].sum()), len(original), np.concatenate([code[:, 0], src[~own]]),
            np.concatenate([code[:, 1], dst[~own]]), np.concatenate([code[:, 2], kind[~own]]).astype(np.int8),
            original)


def _allowed(kind, allowed) -> np.ndarray:
    """kind in allowed, by a lookup table (np.isin sorted every call)."""
    table = np.zeros(8, dtype=bool)
    table[list(allowed)] = True
    return table[kind]


def _labels(total: int, src, dst, kind, allowed) -> np.ndarray:
    """Strong component label of every node (transactions and time nodes) over `allowed` edges."""
    keep = _allowed(kind, allowed)
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    matrix = csr_matrix((np.ones(int(keep.sum()), dtype=np.int8), (src[keep], dst[keep])),
                        shape=(total, total))
    return connected_components(matrix, directed=True, connection="strong")[1]


def _adjacency(total: int, src, dst, kind, allowed):
    """CSR (indptr, targets, edge kinds) of the allowed edges."""
    keep = _allowed(kind, allowed)
    s, d, k = src[keep], dst[keep], kind[keep]
    order = np.argsort(s, kind="stable")
    indptr = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(np.bincount(s, minlength=total), out=indptr[1:])
    return indptr, d[order], k[order]


def _shortest_path(adjacency, labels, label: int, start: int, goal: int, deadline: float):
    """[(node, kind of the edge into it)] of a shortest path start -> goal inside one component,
    real time's free edges weighing 0 (0-1 BFS); None when the deadline passed."""
    indptr, targets, kinds = adjacency
    best = {start: 0}
    before: dict[int, tuple] = {}
    queue = deque([start])
    steps = 0
    while queue:
        x = queue.popleft()
        if x == goal:
            break
        steps += 1
        if steps % 4096 == 0 and time.monotonic() > deadline:
            return None
        here = best[x]
        lo, hi = indptr[x], indptr[x + 1]
        for y, k in zip(targets[lo:hi].tolist(), kinds[lo:hi].tolist()):
            if labels[y] != label:
                continue
            cost = here + (0 if k in FREE else 1)
            if cost < best.get(y, 1 << 62):
                best[y] = cost
                before[y] = (x, k)
                if k in FREE:
                    queue.appendleft(y)
                else:
                    queue.append(y)
    path = [(goal, None)]
    node = goal
    while node != start:
        prev, k = before[node]
        path[-1] = (node, k)
        path.append((prev, None))
        node = prev
    path.reverse()
    return path  # [(start, None), (x1, kind into x1), ..., (goal, kind into goal)]


def _length(path) -> int:
    return sum(1 for _node, k in path[1:] if k not in FREE)


def _steps(graph: Graph, path, marked: int, n: int, original: np.ndarray) -> list:
    """The cycle path v ... u + the marked edge u -> v, as [(transaction id, kind of the edge
    to the next transaction)] from its first transaction, time nodes folded into one
    realtime edge."""
    ring = list(path)
    ring[0] = (ring[0][0], marked)  # v is entered by the closing edge
    first = next(i for i, (node, _k) in enumerate(ring) if node < n)
    ring = ring[first:] + ring[:first]
    out = []
    for i, (node, _into) in enumerate(ring):
        if node >= n:
            continue
        following, into = ring[(i + 1) % len(ring)]
        kind = REALTIME if following >= n or into in (RT_OUT, CHAIN, RT_IN) else into
        out.append((int(graph.ids[original[node]]), int(kind)))
    return out

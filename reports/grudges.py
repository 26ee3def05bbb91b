"""Partition grudges: read from a partition op's value, and said in words.

A grudge maps each node to the nodes whose traffic it drops
(``{"grudge": {"n1": ["n2", "n3"], ...}}``).  Older or other nemeses may give the
grudge bare, or the connected components as a list of node lists; all are read.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

Grudge = dict[str, frozenset[str]]


def parse_grudge(value: Any) -> Grudge | None:
    """A grudge from a partition op's value, or None when the value says nothing usable."""
    if isinstance(value, dict):
        for name in ("grudge", "drops", "cut"):
            if name in value:
                return parse_grudge(value[name])
        for name in ("components", "partitions", "groups"):
            if name in value:
                return parse_grudge(value[name])
        if value and all(isinstance(v, (list, tuple, set)) for v in value.values()):
            return {str(k): frozenset(map(str, v)) for k, v in value.items()}
        return None
    if isinstance(value, list) and value and all(isinstance(c, (list, tuple)) for c in value):
        comps = [set(map(str, c)) for c in value]
        everyone = set().union(*comps)
        return {n: frozenset(everyone - c) for c in comps for n in c}
    return None


def grudge_text(grudge: Grudge) -> str:
    """Which nodes were cut off from which: ``n1 n3 | n2`` for a clean split, with the
    one-way drops spelled out (``n2 drops n1``)."""
    nodes = sorted(set(grudge) | {n for v in grudge.values() for n in v})
    talk = nx.Graph()
    talk.add_nodes_from(nodes)
    one_way = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            a_drops, b_drops = b in grudge.get(a, ()), a in grudge.get(b, ())
            if not a_drops and not b_drops:
                talk.add_edge(a, b)
            elif a_drops != b_drops:
                one_way.append(f"{a} drops {b}" if a_drops else f"{b} drops {a}")
    groups = sorted(" ".join(sorted(c)) for c in nx.connected_components(talk))
    parts = [" | ".join(groups)] if len(groups) > 1 and not one_way else []
    return "; ".join(parts + one_way) or "no cut"

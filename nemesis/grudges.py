"""Network partitions as graphs (networkx), after Jepsen's nemesis grudges.

A *connectivity graph* has an edge a->b when packets from a reach b. A
*grudge* maps each node to the set of nodes whose packets it drops; it is the
complement of the connectivity graph and is what iptables implements (one
INPUT DROP rule per source, inside the dropping host).
"""
from __future__ import annotations

import random

import networkx as nx

Grudge = dict[str, set[str]]

KINDS = ("one", "halves", "majorities-ring", "bridge", "leader", "one-way", "controller")


def complete(nodes: list[str]) -> nx.DiGraph:
    g = nx.complete_graph(nodes, create_using=nx.DiGraph)
    return g


def grudge_of(g: nx.DiGraph) -> Grudge:
    """Each node drops packets from every node that has no edge to it."""
    return {n: {m for m in g.nodes if m != n and not g.has_edge(m, n)} for n in g.nodes}


def components(parts: list[list[str]]) -> nx.DiGraph:
    """Full connectivity within each part, none across."""
    g = nx.DiGraph()
    for part in parts:
        g.add_nodes_from(part)
        g.add_edges_from(nx.complete_graph(part, create_using=nx.DiGraph).edges)
    return g


def isolate(nodes: list[str], victim: str) -> nx.DiGraph:
    return components([[victim], [n for n in nodes if n != victim]])


def halves(nodes: list[str], rng: random.Random) -> nx.DiGraph:
    shuffled = rng.sample(nodes, len(nodes))
    cut = len(nodes) // 2
    return components([shuffled[:cut], shuffled[cut:]])


def bridge(nodes: list[str], rng: random.Random) -> nx.DiGraph:
    """Two halves that cannot talk, and one node that talks to both."""
    shuffled = rng.sample(nodes, len(nodes))
    mid = len(shuffled) // 2
    a, b, hub = shuffled[:mid], shuffled[mid + 1:], shuffled[mid]
    g = components([a + [hub], b + [hub]])
    return g


def majorities_ring(nodes: list[str], rng: random.Random) -> nx.DiGraph:
    """Every node sees a majority (itself and its nearest ring neighbours),
    but no two nodes see the same majority. With fewer than 5 nodes every
    majority is the whole ring minus at most one node; we then cut one ring
    link, the closest non-trivial case."""
    ring = rng.sample(nodes, len(nodes))
    n = len(ring)
    majority = n // 2 + 1
    reach = max(1, -(-(majority - 1) // 2))  # neighbours on each side, rounded up
    g = nx.circulant_graph(n, range(1, reach + 1))
    g = nx.relabel_nodes(g, dict(enumerate(ring))).to_directed()
    if n < 5 and n >= 2 and g.number_of_edges() == n * (n - 1):
        g.remove_edges_from([(ring[0], ring[1]), (ring[1], ring[0])])
    return g


def one_way(nodes: list[str], victim: str) -> nx.DiGraph:
    """The victim hears nobody, everybody still hears the victim."""
    g = complete(nodes)
    g.remove_edges_from([(m, victim) for m in nodes if m != victim])
    return g


def make(kind: str, nodes: list[str], rng: random.Random, leader: str | None = None,
         controller: str | None = None) -> nx.DiGraph:
    """The connectivity graph of one partition of the given kind.

    `nodes` are all hosts that take part (brokers and the controller)."""
    brokers = [n for n in nodes if n != controller]
    if kind == "one":
        return isolate(nodes, rng.choice(brokers))
    if kind == "halves":
        return halves(nodes, rng)
    if kind == "majorities-ring":
        return majorities_ring(nodes, rng)
    if kind == "bridge":
        return bridge(nodes, rng)
    if kind == "leader":
        return isolate(nodes, leader or rng.choice(brokers))
    if kind == "one-way":
        return one_way(nodes, rng.choice(brokers))
    if kind == "controller":
        if controller is None:
            raise ValueError("controller grudge needs the controller host")
        return isolate(nodes, controller)
    raise ValueError(f"unknown partition kind {kind!r}; known: {', '.join(KINDS)}")


def describe(g: nx.DiGraph) -> dict[str, list[str]]:
    """JSON-able grudge for the history: node -> sorted nodes it drops."""
    return {n: sorted(s) for n, s in sorted(grudge_of(g).items()) if s}

"""Drawings of the network partitions the nemesis applied.

A partition op carries a *grudge*: for each node, the nodes whose traffic it drops
(``{"grudge": {"n1": ["n2", "n3"], ...}}``).  Older or other nemeses may give the
grudge bare, or the connected components as a list of node lists; all are read.
Each distinct topology is drawn once, with the times it was applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from .figures import SECONDS, figure, to_data_uri
from .grudges import Grudge, parse_grudge
from .ops import NEMESIS, Op

@dataclass
class Topology:
    grudge: Grudge
    times: list[int] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)
    image: str | None = None


def topologies(ops: list[Op], nodes: list[str]) -> list[Topology]:
    """Distinct grudges applied by nemesis ops whose f mentions a partition."""
    found: dict[tuple, Topology] = {}
    for op in ops:
        if op.process != NEMESIS or "partition" not in str(op.f) or any(
                w in str(op.f) for w in ("stop", "heal")):
            continue
        grudge = parse_grudge(op.invoke_value) or parse_grudge(op.value)
        if not grudge:
            continue
        sig = tuple(sorted((k, tuple(sorted(v))) for k, v in grudge.items()))
        topo = found.setdefault(sig, Topology(grudge))
        topo.times.append(op.start)
        topo.ops.extend(op.indices)
    for topo in found.values():
        topo.image = draw(topo, nodes)
    return list(found.values())


def draw(topo: Topology, nodes: list[str]) -> str:
    """Nodes on a circle; grey lines still carry traffic, red dotted lines are cut."""
    graph = nx.Graph()
    names = sorted(set(map(str, nodes)) | set(topo.grudge) | {n for v in topo.grudge.values() for n in v})
    graph.add_nodes_from(names)
    open_edges, cut_edges, one_way = [], [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            a_drops = b in topo.grudge.get(a, ())
            b_drops = a in topo.grudge.get(b, ())
            (cut_edges if a_drops and b_drops else one_way if a_drops or b_drops else open_edges).append((a, b))
    graph.add_edges_from(open_edges + cut_edges + one_way)
    pos = nx.circular_layout(sorted(graph.nodes))
    when = ", ".join(f"{t * SECONDS:.3f} s" for t in topo.times[:6]) + (" ..." if len(topo.times) > 6 else "")
    with figure(width=3.4, height=3.0) as (fig, ax):
        nx.draw_networkx_edges(graph, pos, edgelist=open_edges, ax=ax, edge_color="#888888", width=1.5)
        nx.draw_networkx_edges(graph, pos, edgelist=one_way, ax=ax, edge_color="#ff7f0e", width=1.5,
                               style="dashed")
        nx.draw_networkx_edges(graph, pos, edgelist=cut_edges, ax=ax, edge_color="#d62728", width=1.5,
                               style="dotted")
        nx.draw_networkx_nodes(graph, pos, ax=ax, node_color="#cfe2f3", edgecolors="#1f77b4", node_size=700)
        nx.draw_networkx_labels(graph, pos, ax=ax, font_size=9)
        ax.set_title(f"applied at {when}", fontsize=8)
        ax.set_axis_off()
        ax.margins(0.2)
        return to_data_uri(fig)

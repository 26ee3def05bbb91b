"""The report's transactions section: how many transactions committed, aborted, stayed
indefinite, how many rebalances the consumer group made, and each dependency cycle the
txn checker found, drawn (transactions as nodes, edges labelled ww / wr / process /
realtime) beside the micro-ops of its transactions and the words of each edge.

Why SVG written here: a cycle has 2-8 transactions; a circle of labelled nodes is a
few lines of markup, where a graph layout library would be a dependency for one picture.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

COLOURS = {"ww": "#b35806", "wr": "#542788", "process": "#1b7837", "realtime": "#2166ac"}
SIZE, RADIUS, NODE = 260, 90, 22


@dataclass
class CycleView:
    kind: str
    component: int
    text: str
    svg: str
    transactions: list = field(default_factory=list)  # {"id", "process", "mops"}
    edges: list = field(default_factory=list)         # {"from", "to", "kind", "text"}


@dataclass
class Section:
    counts: dict
    cycles: list
    allowed: list
    note: str = ""
    client: str = ""   # the client library, its version and the transaction protocol it negotiated


def section(results: dict | None) -> Section | None:
    """The section from results.json, or None when the txn checker did not run."""
    checkers = (results or {}).get("checkers") or {}
    txn = checkers.get("txn")
    if not isinstance(txn, dict) or "transactions" not in txn:
        return None
    counts = dict(txn.get("transactions") or {})
    stats = (results or {}).get("stats") or {}
    counts["rebalances"] = stats.get("rebalances", 0) if isinstance(stats, dict) else 0
    cycles = [CycleView(c.get("kind", "?"), c.get("component", 0), c.get("text", ""), draw(c),
                        c.get("transactions") or [], c.get("edges") or [])
              for c in txn.get("cycles") or [] if isinstance(c, dict)]
    return Section(counts, cycles, list(txn.get("allowed") or []), txn.get("note", ""),
                   client_text((results or {}).get("client")))


def client_text(client) -> str:
    """results.json's `client` in one line: "java 4.1.1; transaction protocol 2 (35 commits; ...)"."""
    if not isinstance(client, dict) or not client.get("client"):
        return ""
    text = f"{client['client']} {client.get('version') or ''}".rstrip()
    protocol = client.get("transaction_protocol")
    if isinstance(protocol, dict):
        seen = ", ".join(f"{k} ({v} commit{'s' if v != 1 else ''})" for k, v in sorted(protocol.items()))
        text += f"; transaction protocol: {seen or 'no transaction committed'}"
    elif protocol:
        text += f"; transaction protocol: {protocol}"
    if client.get("source"):
        text += f" (read from {client['source']})"
    if client.get("cluster_transaction_version") is not None:
        text += f"; the cluster's transaction.version: {client['cluster_transaction_version']}"
    return text


def draw(cycle: dict) -> str:
    """An SVG of the cycle: its transactions on a circle, an arrow per edge with its kind."""
    ids = [t.get("id") for t in cycle.get("transactions") or []]
    n = max(len(ids), 1)
    at = {tid: (SIZE / 2 + RADIUS * math.cos(2 * math.pi * i / n - math.pi / 2),
                SIZE / 2 + RADIUS * math.sin(2 * math.pi * i / n - math.pi / 2)) for i, tid in enumerate(ids)}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="cycle" width="{SIZE}" height="{SIZE}" '
             f'viewBox="0 0 {SIZE} {SIZE}" role="img" aria-label="{escape(cycle.get("kind", ""))} cycle">',
             '<defs>' + "".join(
                 f'<marker id="arrow-{k}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
                 f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>'
                 for k, c in COLOURS.items()) + '</defs>']
    for edge in cycle.get("edges") or []:
        a, b = at.get(edge.get("from")), at.get(edge.get("to"))
        if a is None or b is None:
            continue
        kind = edge.get("kind", "")
        colour = COLOURS.get(kind, "#444")
        dx, dy = b[0] - a[0], b[1] - a[1]
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length
        bend = 18 if n == 2 else 0  # two transactions: the two edges curve apart
        mx, my = (a[0] + b[0]) / 2 - uy * bend, (a[1] + b[1]) / 2 + ux * bend
        x1, y1 = a[0] + ux * NODE, a[1] + uy * NODE
        x2, y2 = b[0] - ux * NODE, b[1] - uy * NODE
        parts.append(f'<path d="M{x1:.1f},{y1:.1f} Q{mx:.1f},{my:.1f} {x2:.1f},{y2:.1f}" fill="none" '
                     f'stroke="{colour}" stroke-width="2" marker-end="url(#arrow-{kind})"/>')
        parts.append(f'<text x="{mx:.1f}" y="{my - 4:.1f}" text-anchor="middle" font-size="12" '
                     f'fill="{colour}">{escape(kind)}</text>')
    for tid, (x, y) in at.items():
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{NODE}" fill="#fff" stroke="#333"/>'
                     f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-size="12">T{tid}</text>')
    parts.append("</svg>")
    return "".join(parts)

"""The txn checker's results.json section, from a Graph, its cycles and their evidence."""
from __future__ import annotations

from checkers.txn.cycles import ALLOWED, Found
from checkers.txn.explain import Evidence, explain
from checkers.txn.graph import FINDINGS, Graph


def summarize(graph: Graph, found: Found, evidence: Evidence) -> dict:
    """counts (every name the checker emits), examples, cycles explained, transaction counts,
    the verdict: false on any finding or G1c-* cycle; unknown when a component's search ran
    out of time (or nothing was checked); G0-* cycles are allowed (Kafka does not isolate
    writes; Jepsen's `allowed-error-types`)."""
    counts = {name: graph.findings[name][0] for name in FINDINGS}
    counts.update(found.counts)
    examples = {name: graph.findings[name][1] for name in FINDINGS if graph.findings[name][0]}
    cycles = [explain(cycle, evidence) for cycle in found.cycles]
    for cycle in cycles:
        examples.setdefault(cycle["kind"], []).append(
            {"ops": [t["id"] for t in cycle["transactions"]], "text": cycle["text"]})
    unchecked = [u for u in found.unchecked if u["family"] == "G1c"]
    if any(n for name, n in counts.items() if name not in ALLOWED):
        valid = False
    elif unchecked or not len(graph.ids):
        valid = "unknown"
    else:
        valid = True
    out = {"valid": valid, "counts": counts, "examples": examples, "allowed": list(ALLOWED),
           "transactions": dict(graph.counts), "cycles": cycles}
    if found.unchecked:
        out["unchecked"] = found.unchecked
        if unchecked:
            out["note"] = ("the cycle search ran out of time in "
                           + ", ".join(f"a component of {u['transactions']} transactions" for u in unchecked))
    return out

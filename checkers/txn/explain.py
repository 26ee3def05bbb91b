"""Each cycle in words: its transactions, each edge's kind and the offsets behind it
("T12 sent 3 to key 5 at offset 12; T40 read it").

The evidence is the flat rows (history.flatten columns) of the cycle's
transactions only: the engines pass what they hold (in-process) or what one
small Spark lookup returns, so the words are the same in both.
"""
from __future__ import annotations

from collections import defaultdict

from history.flatten import decode_value
from checkers.txn.graph import EDGE_NAMES, PROCESS, REALTIME, WR, WW


class Evidence:
    """The sends and reads of some transactions, by transaction id (invoke index)."""

    def __init__(self, sends, reads) -> None:
        self.sent = defaultdict(list)   # txn -> [(key, value text, offset or None)]
        self.read = defaultdict(list)   # txn -> [(key, value text, offset)]
        self.offset: dict[tuple, int] = {}  # (key, value text) -> an offset it was read or acked at
        self.process: dict[int, str] = {}
        self.complete: dict[int, int] = {}
        self.mops: dict[int, list] = defaultdict(list)
        for key, value, offset, kind, process, inv, comp in sends:
            self.sent[inv].append((key, value, offset))
            self.process[inv] = process
            if comp is not None:
                self.complete[inv] = comp
            if offset is not None:
                self.offset[(key, value)] = offset
        for key, offset, value, process, index, _pos, _session, inv, _final in reads:
            self.read[inv].append((key, value, offset))
            self.process[inv] = process
            self.complete.setdefault(inv, index)
            self.offset.setdefault((key, value), offset)

    def micro_ops(self, txn: int) -> list:
        """The transaction's sends and reads as Jepsen's completed micro-ops."""
        out = [["send", key, [self.offset.get((key, value)), decode_value(value)]]
               for key, value, _o in sorted(self.sent[txn], key=lambda s: (s[0], self.offset.get((s[0], s[1])) or -1))]
        polled: dict = {}
        for key, value, offset in sorted(self.read[txn], key=lambda r: (r[0], r[2])):
            polled.setdefault(key, []).append([offset, decode_value(value)])
        if polled:
            out.append(["poll", polled])
        return out

    def edge(self, a: int, b: int, kind: int) -> dict:
        """One edge's evidence: its kind, the key / values / offsets behind it, and a sentence."""
        if kind == WW:
            pairs = [(ob - oa, key, va, oa, vb, ob)
                     for key, va, _ in self.sent[a] for kb, vb, _ in self.sent[b] if kb == key
                     for oa, ob in [(self.offset.get((key, va)), self.offset.get((key, vb)))]
                     if oa is not None and ob is not None and oa < ob]
            if pairs:
                _gap, key, va, oa, vb, ob = min(pairs)
                return {"kind": "ww", "key": key, "value": decode_value(va), "offset": oa,
                        "next_value": decode_value(vb), "next_offset": ob,
                        "text": f"T{a} sent {va} to key {key} at offset {oa}; T{b} sent {vb} to key "
                                f"{key} at offset {ob}, next in the key's order"}
        if kind == WR:
            mine = {(key, value) for key, value, _o in self.sent[a]}
            for key, value, offset in sorted(self.read[b], key=lambda r: (r[0], r[2])):
                if (key, value) in mine:
                    return {"kind": "wr", "key": key, "value": decode_value(value), "offset": offset,
                            "text": f"T{a} sent {value} to key {key} at offset {offset}; T{b} read it"}
        if kind == PROCESS:
            return {"kind": "process", "process": self.process.get(a),
                    "text": f"T{a} and then T{b} were run by process {self.process.get(a)}"}
        if kind == REALTIME:
            return {"kind": "realtime", "completed": self.complete.get(a),
                    "text": f"T{a} completed (op {self.complete.get(a)}) before T{b} was invoked (op {b})"}
        return {"kind": EDGE_NAMES.get(kind, str(kind)), "text": f"T{a} -> T{b}"}


def explain(cycle, evidence: Evidence) -> dict:
    """A cycle (checkers.txn.cycles.Cycle) -> its results.json form."""
    steps = cycle.steps
    edges = [{"from": a, "to": steps[(i + 1) % len(steps)][0], **evidence.edge(a, steps[(i + 1) % len(steps)][0], k)}
             for i, (a, k) in enumerate(steps)]
    return {"kind": cycle.kind, "component": cycle.component,
            "transactions": [{"id": a, "process": evidence.process.get(a), "mops": evidence.micro_ops(a)}
                             for a, _k in steps],
            "edges": edges,
            "text": "; ".join(e["text"] for e in edges) + f"; so T{steps[0][0]} precedes itself"}


def cycle_transactions(cycles) -> set[int]:
    return {a for cycle in cycles for a, _k in cycle.steps}

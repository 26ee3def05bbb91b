"""The in-process reduction of flat rows (history.flatten) to a `Graph`.

Definitions (checkers/spark/txn_anomalies.py computes the same ones as Spark jobs):

- a transaction's sends are *committed* when it is `ok`, or `info` and one of
  its values was read (Jepsen's `must-have-committed?`: a transaction is atomic,
  so one value seen means all were committed);
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
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from history.flatten import decode_value
from checkers.txn.graph import FAIL, FINDINGS, INFO, OK, PROCESS, WR, WW, Graph, top_examples

TYPES = {"ok": OK, "fail": FAIL, "info": INFO}


def reduce(sends: list[tuple], reads: list[tuple], ends: list[tuple]) -> Graph:
    """Flat send / read / end rows -> the Graph of their transactions."""
    ttype: dict[int, int] = {}
    tproc: dict[int, str] = {}
    tcomp: dict[int, int] = {}
    writer: dict[tuple, int] = {}
    sent_at: dict[tuple, int] = {}
    for key, value, offset, kind, process, inv, comp in sends:
        code = TYPES[kind]
        ttype[inv] = code
        tproc[inv] = process
        if comp is not None and code == OK:
            tcomp[inv] = comp
        if writer.get((key, value), inv) >= inv:  # a value sent twice: its first sender
            writer[(key, value)] = inv
        if offset is not None and code == OK and writer[(key, value)] == inv:
            sent_at[(key, value)] = offset
    readers: dict[tuple, set] = defaultdict(set)
    pairs: set[tuple] = set()
    max_read: dict[int, int] = {}
    for key, offset, value, process, index, _pos, _session, inv, _final in reads:
        readers[(key, value)].add(inv)
        pairs.add((key, offset, value))
        if offset > max_read.get(key, -1):
            max_read[key] = offset
        if inv not in ttype:
            ttype[inv], tproc[inv], tcomp[inv] = OK, process, index
    proven = {writer[kv] for kv in readers if kv in writer and ttype[writer[kv]] == INFO}
    committed = lambda inv: ttype[inv] == OK or inv in proven  # noqa: E731
    for kv, offset in sent_at.items():
        pairs.add((kv[0], offset, kv[1]))

    findings = {name: [] for name in FINDINGS}
    at_offset: dict[tuple, set] = defaultdict(set)
    offsets_of: dict[tuple, set] = defaultdict(set)
    for key, offset, value in pairs:
        at_offset[(key, offset)].add(value)
        offsets_of[(key, value)].add(offset)
    clean: dict[int, dict] = defaultdict(dict)  # key -> value -> lowest offset with one value
    for (key, offset), values in at_offset.items():
        if len(values) > 1:
            findings["txn-inconsistent-offsets"].append(
                {"sort": (key, offset), "key": key, "offset": offset,
                 "values": sorted(decode_value(v) for v in values)})
            continue
        (value,) = values
        known = clean[key].get(value)
        if known is None or offset < known:
            clean[key][value] = offset
    for (key, value), offsets in offsets_of.items():
        if len(offsets) > 1:
            findings["txn-duplicate"].append({"sort": (key, min(offsets)), "key": key,
                                          "value": decode_value(value), "offsets": sorted(offsets)})

    edges: list[tuple] = []
    for key, values in clean.items():
        order = sorted(values.items(), key=lambda item: item[1])
        for (v1, _o1), (v2, _o2) in zip(order, order[1:]):
            a, b = writer.get((key, v1)), writer.get((key, v2))
            if a is not None and b is not None and ttype[a] != FAIL and ttype[b] != FAIL:
                edges.append((a, b, WW))
    own: dict[int, dict] = defaultdict(dict)  # txn -> key -> values it read of its own sends
    for (key, value), who in readers.items():
        w = writer.get((key, value))
        if w is None:
            continue
        if ttype[w] == FAIL:
            findings["G1a"].append({"sort": (key, w), "key": key, "value": decode_value(value),
                                    "ops": [w] + sorted(who)[:9]})
            continue
        for r in who:
            if r == w:
                own[w].setdefault(key, []).append(decode_value(value))
            else:
                edges.append((w, r, WR))
    ended = {row[0] for row in ends}
    for (key, value), w in writer.items():
        if (key, value) in readers or not committed(w):
            continue
        offset = sent_at.get((key, value))
        lost = offset <= max_read.get(key, -1) if offset is not None else key in ended
        if lost:
            findings["txn-lost-write"].append({"sort": (key, w), "key": key, "value": decode_value(value),
                                           "offset": offset, "ops": [w],
                                           "max_read_offset": max_read.get(key)})
    by_process: dict[str, list] = defaultdict(list)
    for inv, code in ttype.items():
        if code != FAIL:
            by_process[tproc[inv]].append(inv)
    for txns in by_process.values():
        txns.sort()
        edges.extend((a, b, PROCESS) for a, b in zip(txns, txns[1:]) if ttype[a] == OK)

    ids = np.array(sorted(inv for inv, code in ttype.items() if code != FAIL), dtype=np.int64)
    complete = np.array([tcomp.get(inv, -1) if ttype[inv] == OK else -1 for inv in ids.tolist()],
                        dtype=np.int64)
    for w, keys in own.items():  # one per transaction, at its lowest such key
        key = min(keys)
        findings["precommitted-read"].append({"sort": (w, key), "key": key, "values": sorted(keys[key]),
                                              "ops": [w]})
    counts = {"committed": sum(1 for inv in ttype if committed(inv)),
              "aborted": sum(1 for code in ttype.values() if code == FAIL),
              "indefinite": sum(1 for inv, code in ttype.items() if code == INFO and inv not in proven)}
    return Graph(ids, complete, np.array(edges, dtype=np.int64),
                 {name: (len(found), top_examples(found)) for name, found in findings.items()}, counts)

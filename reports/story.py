"""The story of each loss: one row per lost or divergent acknowledged write.

A reviewer asks of every acknowledged write the cluster lost: who acknowledged it and when, which leader
(in which epoch) held it then, what the nemesis did next, and which event
removed it: a truncation, or an election of a replica that did not have it.
All of that is in the store (history, broker and controller logs, samples), so
each row puts it together on the report's one time axis (seconds since start).

Its *losses* are the acknowledged sends absent from the final reads (the
scenario results' `unread_acknowledged`); without final reads (an interrupted
run), the examples of every loss kind the checkers report (LOSS_TYPES: the log
checker's `lost-write`, `read-then-lost` and `unseen`, the replica diff's
`lost-acknowledged`).  Divergent offsets come from the replica diff.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.replica_diff import one_value

from .anomalies import Anomaly
from .clock import RunClock
from .node_events import NodeEvent
from .ops import NEMESIS, Fault

LOSS_TYPES = ("lost-write", "read-then-lost", "unseen", "lost-acknowledged")
MAX_ROWS = 500


@dataclass
class Event:
    """One line of a story: when, and what happened."""

    t: float | None
    text: str
    op: int | None = None  # history index, when the event is an op


@dataclass
class Story:
    key: int
    offset: int | None
    value: Any
    kind: str  # lost | divergent
    types: list[str] = field(default_factory=list)  # anomaly names the checkers gave it
    ack: Event | None = None
    leader: str = ""
    epoch: int | None = None
    read: Event | None = None  # read before it was lost (read-then-lost)
    faults: list[Event] = field(default_factory=list)
    removal: list[Event] = field(default_factory=list)
    now: str = ""  # what the offset holds in the end
    # a transactional write: its transaction and the same process's transaction before it
    # (producer id and epoch where the client says them): a late message of that one can
    # stand for this one's (KAFKA-17754's class)
    txn: list[Event] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return f"story-{self.key}-{self.offset}-{self.value}"

    @property
    def lost_at(self) -> float | None:
        times = [e.t for e in self.removal if e.t is not None]
        return max(times) if times else None


# ----------------------------------------------------------------- writes
def _sent(line: dict) -> list[tuple[int, Any, Any]]:
    """(key, offset or None, value) of every send in a completion line: a `send` op's, or each
    send micro-op of a `txn` op's (an acknowledged one carries [offset, value]); [] where the
    line is not one."""
    def split(v):
        return (v[0], v[1]) if isinstance(v, list) else (None, v)

    try:
        if line.get("f") == "send":
            key, v = line["value"]
            return [(int(key), *split(v))]
        if line.get("f") == "txn":
            return [(int(m[1]), *split(m[2])) for m in line["value"]
                    if isinstance(m, list) and len(m) == 3 and m[0] == "send"]
    except (TypeError, ValueError, KeyError, IndexError):
        pass
    return []


def _sends(history: list[dict]) -> dict[tuple[int, Any], tuple[dict | None, dict]]:
    """(key, value) -> (invoke line, ok line) of every acknowledged send: a `send` op's, or
    a send of a committed (`ok`) `txn` op's (the ok line then carries `txn`: the txn's
    completion)."""
    open_: dict[Any, dict] = {}
    acked = {}
    for line in history:
        if line.get("f") not in ("send", "txn") or line.get("process") == NEMESIS:
            continue
        if line.get("type") == "invoke":
            open_[(line.get("f"), line.get("process"))] = line
        elif line.get("type") == "ok":
            inv = open_.pop((line.get("f"), line.get("process")), None)
            txn = {"txn": line} if line["f"] == "txn" else {}
            for key, offset, value in _sent(line):
                acked[(key, value)] = (inv, {**line, "offset": offset, **txn})
        elif line.get("type") in ("fail", "info"):
            open_.pop((line.get("f"), line.get("process")), None)
    return acked


def _reads(history: list[dict]) -> tuple[int | None, dict, dict]:
    """(index of `final`, key -> offset -> value in the final reads, (key, value) -> first read line)."""
    final_at = next((line.get("index") for line in history
                     if line.get("process") == NEMESIS and line.get("f") == "final"), None)
    final: dict[int, dict[int, Any]] = defaultdict(dict)
    first_read: dict[tuple[int, Any], dict] = {}
    for line in history:
        if line.get("f") != "poll" or line.get("type") != "ok" or not isinstance(line.get("value"), dict):
            continue
        is_final = final_at is not None and isinstance(line.get("index"), int) and line["index"] > final_at
        for key, pairs in line["value"].items():
            for pair in pairs if isinstance(pairs, list) else []:
                if not (isinstance(pair, list) and len(pair) == 2):
                    continue
                try:
                    k = int(key)
                except (TypeError, ValueError):
                    continue
                if is_final:
                    final[k][pair[0]] = pair[1]
                else:
                    first_read.setdefault((k, pair[1]), line)
    return final_at, final, first_read


def _checker_types(anomalies: list[Anomaly]) -> dict[tuple[int, Any], list[str]]:
    out: dict[tuple[int, Any], list[str]] = defaultdict(list)
    for a in anomalies:
        for ex in a.examples:
            try:
                k = int(ex.get("key"))
            except (TypeError, ValueError):
                continue
            for v in ex.get("values", [ex.get("value")]) if isinstance(ex.get("values", []), list) else []:
                if a.name not in out[(k, v)]:
                    out[(k, v)].append(a.name)
    return out


def losses(history: list[dict], anomalies: list[Anomaly]) -> list[tuple[int, int | None, Any]]:
    """(key, offset, value) of every acknowledged send missing from the final reads
    (without a final phase: of every loss-kind example the checkers give)."""
    acked = _sends(history)
    final_at, final, _ = _reads(history)
    if final_at is not None:
        kept = {(k, v) for k, offs in final.items() for v in offs.values()}
        return sorted(((k, ok["offset"], v) for (k, v), (_, ok) in acked.items() if (k, v) not in kept),
                      key=lambda r: (r[0], r[1] if isinstance(r[1], int) else -1, str(r[2])))
    found = {}
    for a in anomalies:
        if a.name in LOSS_TYPES:
            for ex in a.examples:
                try:
                    found[(int(ex["key"]), ex.get("value"))] = ex.get("offset")
                except (KeyError, TypeError, ValueError):
                    continue
    return sorted(((k, o, v) for (k, v), o in found.items()), key=lambda r: (r[0], str(r[1]), str(r[2])))


# ----------------------------------------------------------------- leaders
def _leader_from_samples(samples: list[dict], key: int, t_ns: int) -> tuple[str, int | None]:
    best: tuple[int, int, str] | None = None  # (time, epoch, node)
    for s in samples:
        t = s.get("time")
        if not isinstance(t, int) or t > t_ns:
            continue
        state = s.get("state") if isinstance(s.get("state"), dict) else {}
        for p in state.get("partitions") or []:
            if isinstance(p, dict) and p.get("partition") == key and p.get("role") == "leader":
                cand = (t, p.get("leader_epoch") if isinstance(p.get("leader_epoch"), int) else -1,
                        str(s.get("node")))
                if best is None or cand[:2] > best[:2]:
                    best = cand
    return (best[2], best[1] if best[1] >= 0 else None) if best else ("", None)


def _leader_at(events: list[NodeEvent], samples: list[dict], key: int, t: float) -> tuple[str, int | None, str]:
    """(node, epoch, source) of the leader of ``key`` at ``t`` seconds."""
    leading = [e for e in events if e.key == key and e.kind == "leader" and e.t is not None and e.t <= t]
    if leading:
        return leading[-1].node, leading[-1].epoch, "broker log"
    node, epoch = _leader_from_samples(samples, key, int(t * 1e9))
    return node, epoch, "samples" if node else ""


# ----------------------------------------------------------------- stories
def _removal(events: list[NodeEvent], drops: list[dict], key: int, offset: int | None,
             after: float, samples: list[dict] | None = None) -> list[Event]:
    """Truncations over the offset and elections of a leader without it, after the ack."""
    if not isinstance(offset, int):
        return []
    out = []
    for e in events:
        if e.key != key or e.t is None or e.t < after:
            continue
        if e.kind == "truncate" and e.to is not None and e.leo is not None and e.to <= offset < e.leo:
            out.append(Event(e.t, e.describe()))
        elif e.kind == "leader" and e.leo is not None and e.leo <= offset:
            out.append(Event(e.t, f"{e.describe()}: elected without offset {offset}"))
            # how it could be elected: an ISR change since the ack that let it in (a late
            # expansion about an earlier incarnation of it: KAFKA-14139, a replaced disk)
            joins = [Event(i.t, i.describe()) for i in events
                     if i.kind == "isr" and i.key == key and i.t is not None and after <= i.t <= e.t
                     and e.node in i.added]
            joins = joins or _isr_joins(samples or [], key, e.node, after, e.t)   # no log line: the samples
            out += [j for j in joins if j not in out]
    if not any("truncated" in e.text for e in out):  # no broker log: the sampler's LEO drops
        for d in drops:
            t = d.get("time_ns")
            if (d.get("key") == key and isinstance(t, int) and t / 1e9 >= after
                    and isinstance(d.get("to"), int) and isinstance(d.get("from"), int)
                    and d["to"] <= offset < d["from"]):
                out.append(Event(t / 1e9, f"{d.get('node')} LEO dropped from {d['from']} to {d['to']} (samples)"))
    out.sort(key=lambda e: e.t)
    return out


def _isr_joins(samples: list[dict], key: int, node: str, after: float, until: float) -> list[Event]:
    """When `node` joined the key's ISR, as the leader's samples show it, between `after` and `until`
    (seconds): the first sample that lists it after one that did not."""
    seen: list[tuple[float, tuple[str, ...]]] = []
    for s in samples:
        t = s.get("time")
        state = s.get("state") if isinstance(s.get("state"), dict) else {}
        for p in state.get("partitions") or []:
            if (isinstance(t, int) and isinstance(p, dict) and p.get("partition") == key
                    and p.get("role") == "leader" and isinstance(p.get("isr"), list)):
                seen.append((t / 1e9, tuple(str(x) for x in p["isr"])))
    seen.sort()
    out, was_in = [], None
    for t, isr in seen:
        now_in = node in isr
        if now_in and was_in is False and after <= t <= until:
            out.append(Event(t, f"{node} joined the ISR [{', '.join(isr)}] (samples)"))
        was_in = now_in
    return out


def _faults(faults: list[Fault], start: float, end: float | None) -> list[Event]:
    """Faults active at the ack or begun before the loss."""
    out = []
    for f in faults:
        a, b = f.start / 1e9, f.end / 1e9
        if b >= start and (end is None or a <= end):
            out.append(Event(a, f"{f.label} ({a:.3f}-{b:.3f} s)", f.ops[0] if f.ops else None))
    return out


def held_records(logs: dict[int, dict[str, dict]]) -> dict[tuple[int, int], dict[str, Any]]:
    """(key, offset) -> node -> the value its log holds there (from the dumps)."""
    out: dict[tuple[int, int], dict[str, Any]] = defaultdict(dict)
    for key, nodes in logs.items():
        for node, log in nodes.items():
            for offset, rec in log["records"].items():
                out[(key, offset)][node] = rec[2]
    return dict(out)


def held_values(logs: dict[int, dict[str, dict]]) -> dict[int, set]:
    """key -> every value some replica still holds (from the dumps)."""
    return {key: {rec[2] for node in nodes.values() for rec in node["records"].values()
                  if isinstance(rec[2], (int, str, float))}
            for key, nodes in logs.items()}


def stories(history: list[dict], faults: list[Fault], samples: list[dict], anomalies: list[Anomaly],
            events: list[NodeEvent], drops: list[dict],
            divergent: list[tuple[int, int, list[tuple[str, Any, Any]]]],
            held: dict[int, set] | None = None,
            records: dict[tuple[int, int], dict[str, Any]] | None = None) -> list[Story]:
    """One story per loss (see `losses`), then one per divergent offset (key, offset, [(node, epoch, value)])
    not already told.  With the replicas' dumps (``held``), a write some replica still holds
    is not lost, only beyond the final reads (their HW stopped short of it): no story."""
    acked = _sends(history)
    _, final, first_read = _reads(history)
    types = _checker_types(anomalies)
    told: list[Story] = []
    lost = [w for w in losses(history, anomalies) if not held or w[2] not in held.get(w[0], ())]
    # each read of the history once, not once per story
    uncommitted = _uncommitted_txns(history) if lost else {}
    senders = _senders(history) if lost and records else {}
    for key, offset, value in lost[:MAX_ROWS]:
        told.append(_story(key, offset, value, "lost", acked, first_read, final,
                           types, faults, samples, events, drops, uncommitted, records, senders))
    seen = {(s.key, s.offset) for s in told}
    for key, offset, holders in divergent:
        if (key, offset) in seen or len(told) >= MAX_ROWS:
            continue
        seen.add((key, offset))
        value = next((v for _n, _e, v in holders if (key, v) in acked), holders[0][2] if holders else None)
        s = _story(key, offset, value, "divergent", acked, first_read, final,
                   types, faults, samples, events, drops)
        held = ", ".join(f"{n}: {v} (epoch {e})" for n, e, v in holders)
        same = one_value(v for _n, _e, v in holders)   # the replica diff's differs_in: "epoch"
        s.now = ("the same record in different leader epochs: " if same else "replicas hold ") + held
        told.append(s)
    return told


def _producer_text(line: dict) -> str:
    p = line.get("producer")
    if not isinstance(p, dict) or "id" not in p:
        return ""
    end = p.get("end_epoch")
    return f" (producer {p['id']}, epoch {p.get('epoch')}{'' if end in (None, p.get('epoch')) else f', ended at {end}'})"


def _uncommitted_txns(history) -> dict[Any, list[dict]]:
    """process -> its txn completions that did not commit (fail, info), in history order."""
    out: dict[Any, list[dict]] = defaultdict(list)
    for line in history:
        if line.get("f") == "txn" and line.get("type") in ("fail", "info"):
            out[line.get("process")].append(line)
    return out


def _txn_context(uncommitted: dict[Any, list[dict]], done: dict) -> list[Event]:
    """The committed transaction of a lost send, and the last transaction of the same
    process that did not commit before it, with their producers."""
    out = [Event(done["time"] / 1e9 if isinstance(done.get("time"), int) else None,
                 f"in a committed transaction of process {done.get('process')}{_producer_text(done)}",
                 done.get("index"))]
    before = None
    for line in uncommitted.get(done.get("process"), ()):
        if not (isinstance(line.get("index"), int) and isinstance(done.get("index"), int)
                and line["index"] < done["index"]):
            break
        before = line
    if before is not None:
        error = f": {str(before['error'])[:160]}" if before.get("error") else ""
        out.append(Event(before["time"] / 1e9 if isinstance(before.get("time"), int) else None,
                         f"the process's last transaction before it that did not commit: op {before.get('index')} "
                         f"{before.get('type')}{error}{_producer_text(before)}", before.get("index")))
    return out


def _story(key, offset, value, kind, acked, first_read, final, types, faults, samples,
           events, drops, uncommitted=None, records=None, senders=None) -> Story:
    s = Story(key, offset, value, kind, types=list(types.get((key, value), [])))
    _, ok = acked.get((key, value), (None, None))
    ack_t = None
    if ok is not None:
        ack_t = ok.get("time", 0) / 1e9 if isinstance(ok.get("time"), int) else None
        s.ack = Event(ack_t, f"op {ok.get('index')} (process {ok.get('process')}) at offset {ok['offset']}", ok.get("index"))
    if ack_t is not None:
        s.leader, s.epoch, _ = _leader_at(events, samples, key, ack_t)
    read = first_read.get((key, value))
    if read is not None and isinstance(read.get("time"), int):
        s.read = Event(read["time"] / 1e9, f"read by op {read.get('index')} (process {read.get('process')})",
                       read.get("index"))
        if "read-then-lost" not in s.types and kind == "lost":
            s.types.append("read-then-lost")
    if ok is not None and ok.get("txn") is not None:
        s.txn = _txn_context(uncommitted or {}, ok["txn"])
    s.removal = _removal(events, drops, key, offset, ack_t or 0.0, samples)
    s.faults = _faults(faults, ack_t or 0.0, s.lost_at)
    if isinstance(offset, int) and offset in final.get(key, {}):
        other = final[key][offset]
        _, other_ok = acked.get((key, other), (None, None))
        s.now = f"value {other}" + (f", acknowledged by op {other_ok.get('index')} at "
                                     f"{other_ok.get('time', 0) / 1e9:.3f} s" if other_ok else "")
    elif kind == "lost" and records and (key, offset) in records:
        held, sent = records[(key, offset)], senders or {}
        s.now = "; ".join(f"value {v!r}{_sender_text(sent.get((key, v)))} in {', '.join(sorted(nodes))}"
                          for v, nodes in sorted(_by_value(held).items(), key=lambda kv: str(kv[0]))) \
            + " (the replicas' logs, aborted records included)"
    elif kind == "lost":
        s.now = "nothing (the final reads end before it)" if final.get(key) else "no final read of this key"
    return s


def _senders(history) -> dict[tuple[int, Any], dict]:
    """(key, value) -> the completion of the op that sent it (a send, or a txn's send)."""
    return {(key, value): line for line in history
            if line.get("type") not in ("invoke", None) and line.get("process") != NEMESIS
            for key, _offset, value in _sent(line)}


def _sender_text(line: dict | None) -> str:
    if line is None:
        return ""
    return f" (sent by op {line.get('index')}, process {line.get('process')}, {line.get('type')})"


def _by_value(held: dict[str, Any]) -> dict[Any, list[str]]:
    out: dict[Any, list[str]] = defaultdict(list)
    for node, value in held.items():
        out[value].append(node)
    return out


def plot_marks(told: list[Story]) -> dict[int, list[tuple[float, int, str]]]:
    """key -> (ack time s, offset, label) for the replica plots."""
    out: dict[int, list[tuple[float, int, str]]] = defaultdict(list)
    for s in told:
        if s.ack is not None and s.ack.t is not None and isinstance(s.offset, int):
            out[s.key].append((s.ack.t, s.offset, f"{s.kind} {s.value}"))
    return out


def focus_offsets(told: list[Story]) -> dict[int, set[int]]:
    """key -> offsets the log diff must show unfolded."""
    out: dict[int, set[int]] = defaultdict(set)
    for s in told:
        if isinstance(s.offset, int):
            out[s.key].add(s.offset)
    return out

"""Pair history lines into operations and nemesis lines into fault intervals.

A history line is half an operation: the invocation and the completion arrive as
separate lines of one process.  Timelines, latencies and the nemesis shading all
need the whole operation (start, end, outcome), so this is done once here.

Which nemesis ops start and stop which fault, and its colour, come from the run
(test.json `faults`, written by the runner from each registered FaultKind); a
store without that table uses the faults registered now. Nothing is guessed
from op names: an op no fault declares is an instant marker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .grudges import grudge_text, parse_grudge

NEMESIS = "nemesis"

SECONDS = 1e-9  # history times are nanoseconds
FINAL = "final"  # the runner's op after the final heal: ends every fault
OTHER_COLOUR = "#7f7f7f"


def fault_table(test: dict | None = None) -> dict[str, dict]:
    """{fault: {"start", "stop", "colour"}} of a run: test.json's `faults`, else the registry's."""
    table = (test or {}).get("faults")
    if isinstance(table, dict) and table:
        return {str(k): v for k, v in table.items() if isinstance(v, dict)}
    try:
        from harness import registry
        kinds = registry.load_all(registry.FAULTS)
    except Exception:  # noqa: BLE001 - a report renders without the registry, with markers only
        return {}
    return {name: {"start": k.start, "stop": k.stop, "colour": k.colour} for name, k in kinds.items()}


def fault_actions(table: dict[str, dict]) -> dict[str, tuple[str, bool]]:
    """f of a nemesis op -> (fault, True when it starts the fault, False when it ends it)."""
    out = {}
    for name, kind in table.items():
        out[str(kind.get("stop"))] = (name, False)
        out[str(kind.get("start"))] = (name, True)
    return out


@dataclass(slots=True)
class Op:
    """One operation: its invocation and completion joined."""

    process: Any
    f: Any
    type: str  # ok | fail | info (an invocation that never completed counts as info)
    start: int
    end: int
    invoke_index: int | None
    complete_index: int | None
    value: Any  # the completion's value, or the invocation's if there is no completion
    invoke_value: Any
    indices: tuple[int, ...] = ()  # history indices of its lines
    ref: bool = False  # an anomaly example refers to it

    @property
    def latency(self) -> int:
        return self.end - self.start


def _indices(a: Any, b: Any) -> tuple[int, ...]:
    if type(a) is int:
        return (a, b) if type(b) is int else (a,)
    return (b,) if type(b) is int else ()


def mark_referenced(ops: list[Op], referenced: set[int]) -> None:
    """Flag the ops an anomaly refers to, once, so later passes test a bool."""
    if referenced:
        for op in ops:
            if op.invoke_index in referenced or op.complete_index in referenced:
                op.ref = True


@dataclass(slots=True)
class Fault:
    """A shaded interval of nemesis activity."""

    kind: str
    start: int
    end: int
    label: str
    ops: tuple[int, ...]
    colour: str = OTHER_COLOUR


def _as_int(x: Any, default: int) -> int:
    try:
        return int(x)
    except (TypeError, ValueError):
        return default


def pair_ops(history: list[dict]) -> list[Op]:
    """Join invocations with the next completion of the same process, in history order."""
    pending: dict[Any, dict] = {}
    ops: list[Op] = []
    end_of_test = 0
    for line in history:
        t = line.get("time")
        if type(t) is not int:
            t = _as_int(t, end_of_test)
        if t > end_of_test:
            end_of_test = t
        proc = line.get("process")
        key = proc if type(proc) in (int, str) else repr(proc)
        kind = line.get("type")
        idx = line.get("index")
        if type(idx) is not int:
            idx = None
        if kind == "invoke":
            if key in pending:  # an invocation left open: the process moved on
                ops.append(_open_op(pending.pop(key), t))
            pending[key] = line
            continue
        inv = pending.pop(key, None)
        if inv is None:
            ops.append(Op(proc, line.get("f"), str(kind), t, t, None, idx, line.get("value"),
                          line.get("value"), _indices(idx, None)))
            continue
        inv_idx = inv.get("index")
        ops.append(Op(proc, line.get("f"), str(kind), _as_int(inv.get("time"), t), t,
                      inv_idx, idx, line.get("value"), inv.get("value"), _indices(inv_idx, idx)))
    ops.extend(_open_op(inv, end_of_test) for inv in pending.values())
    ops.sort(key=lambda op: (op.start, op.invoke_index if op.invoke_index is not None else -1))
    return ops


def _open_op(inv: dict, end: int) -> Op:
    t = _as_int(inv.get("time"), end)
    return Op(inv.get("process"), inv.get("f"), "info", t, max(t, end),
              inv.get("index"), None, inv.get("value"), inv.get("value"), _indices(inv.get("index"), None))


def nemesis_label(op: Op) -> str:
    """Short words for a nemesis op, e.g. 'kill n1' or 'partition'."""
    value = op.invoke_value if op.invoke_value is not None else op.value
    if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return f"{op.f} {' '.join(map(str, value))}".strip()
    if isinstance(value, str):
        return f"{op.f} {value}"
    if isinstance(value, dict) and "healed" in value and (grudge := parse_grudge(value["healed"])):
        return f"{op.f} {grudge_text(grudge)}"   # a partial heal: the cuts it ended
    if isinstance(value, dict) and isinstance(value.get("text"), str):   # a fault's own words (disk-loss, membership)
        return f"{op.f} {value['text']}"
    if isinstance(value, (dict, list)) and "partition" in str(op.f) and (grudge := parse_grudge(value)):
        return f"{op.f} {grudge_text(grudge)}"
    return str(op.f)


def fault_intervals(ops: list[Op], end_of_test: int,
                    table: dict[str, dict] | None = None) -> tuple[list[Fault], list[Op]]:
    """Fault intervals from nemesis ops, plus nemesis ops that are neither start nor end.

    A start opens an interval of its fault; the next stop of that fault (or ``final``)
    closes every open interval of it. `table` is the run's fault_table(); fs it
    does not name become instant markers.
    """
    table = fault_table() if table is None else table
    actions = fault_actions(table)
    colour = {name: str(kind.get("colour") or OTHER_COLOUR) for name, kind in table.items()}

    def fault(kind, start, end, label, ix):
        return Fault(kind, start, end, label, ix, colour.get(kind, OTHER_COLOUR))

    open_: dict[str, list[tuple[int, str, list[int]]]] = {}
    faults: list[Fault] = []
    markers: list[Op] = []
    for op in ops:
        if op.process != NEMESIS:
            continue
        f = str(op.f)
        action = actions.get(f)
        if f == FINAL:
            for kind, starts in open_.items():
                faults += [fault(kind, s, op.start, lbl, tuple(ix) + op.indices) for s, lbl, ix, _v in starts]
            open_.clear()
            markers.append(op)
        elif action is None:
            markers.append(op)
        elif action[1]:
            open_.setdefault(action[0], []).append((op.start, nemesis_label(op), list(op.indices), op.value))
        else:
            starts = open_.pop(action[0], [])
            healed = op.value.get("healed") if isinstance(op.value, dict) else None
            if healed is not None:   # a partial heal: it ends the cuts it names, the others stay open
                gone = parse_grudge(healed)
                keep = [x for x in starts if parse_grudge(x[3]) != gone]
                if len(keep) < len(starts):
                    open_[action[0]] = keep
                    starts = [x for x in starts if x not in keep]
            for s, lbl, ix, _v in starts:
                faults.append(fault(action[0], s, op.start, f"{lbl} .. {nemesis_label(op)}",
                                    tuple(ix) + op.indices))
    for kind, starts in open_.items():
        faults += [fault(kind, s, end_of_test, lbl, tuple(ix)) for s, lbl, ix, _v in starts]
    faults.sort(key=lambda f: f.start)
    return faults, markers

"""Jepsen-style timelines: one column per process, one box per op, rows in history order.

A browser cannot hold a million boxes, so a long history is shown as windows of
ops around the anomalies (or around the first fault when there is none); the
whole run is summarised by the downsampled overview plot.  Rows follow the order
of invocations and completions, so a short op is as legible as a long one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .ops import NEMESIS, SECONDS, Fault, Op, nemesis_label

FULL_LIMIT = 300  # a history with at most this many ops gets one window
WINDOW_OPS = 120  # ops after an anomaly cluster
LEAD_OPS = 12  # ops before it: the anomaly is at the top of its window, not a scroll away
SMALL_LIMIT = 60  # a history with anomalies and more ops than this is shown around them
MAX_WINDOWS = 5
ROW_PX = 14
COL_PX = 132


@dataclass
class Box:
    anchor: str
    target: str
    css: str
    top: int
    left: int
    height: int
    label: str
    title: str
    indices: tuple[int, ...] = ()


@dataclass
class Band:
    top: int
    height: int
    colour: str
    label: str
    lane: int = 0  # overlapping bands get different lanes, so each stays visible


def lanes(spans: list[tuple[float, float]]) -> list[int]:
    """A lane per span such that spans that overlap never share one (greedy, in start order)."""
    ends: list[float] = []
    out = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda i: spans[i][0]):
        start, end = spans[i]
        lane = next((n for n, e in enumerate(ends) if e < start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        out[i] = lane
    return out


@dataclass
class Window:
    title: str
    processes: list[str]
    boxes: list[Box] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    height: int = 0

    @property
    def width(self) -> int:
        return COL_PX * len(self.processes)


def short_value(op: Op) -> str:
    """A few characters that identify the op in its box, e.g. 'send 0 17 -> 42'."""
    if op.process == NEMESIS:
        return nemesis_label(op)
    inv, val = op.invoke_value, op.value
    if op.f == "send" and isinstance(inv, list) and len(inv) == 2:
        text = f"send {inv[0]} {inv[1]}"
        if op.type == "ok" and isinstance(val, list) and len(val) == 2 and isinstance(val[1], list) and val[1]:
            text += f" @{val[1][0]}"
        return text
    if op.f == "poll" and isinstance(val, dict):
        return "poll " + " ".join(f"{k}:{len(v) if isinstance(v, list) else '?'}" for k, v in list(val.items())[:3])
    return f"{op.f} {json.dumps(val, default=str)[:30]}"


def _full_title(op: Op) -> str:
    idx = "/".join(map(str, op.indices))
    return (f"#{idx} process {op.process} {op.f} {op.type} "
            f"[{op.start * SECONDS:.3f} s .. {op.end * SECONDS:.3f} s] "
            f"{json.dumps(op.value, default=str)[:400]}")


def _clusters(positions: list[int]) -> list[tuple[int, int]]:
    """Merge sorted op positions into (first, last) runs no more than a window apart."""
    runs: list[list[int]] = []
    for p in sorted(positions):
        if runs and p - runs[-1][1] <= WINDOW_OPS:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return [(a, b) for a, b in runs]


def windows(ops: list[Op], faults: list[Fault]) -> list[Window]:
    if not ops:
        return []
    pos = [i for i, op in enumerate(ops) if op.ref]
    if len(ops) <= SMALL_LIMIT or (len(ops) <= FULL_LIMIT and not pos):
        return [layout(ops, faults, f"All {len(ops)} ops")]
    reason = "around anomaly ops"
    if not pos:
        first = next((i for i, op in enumerate(ops) if op.process == NEMESIS), 0)
        pos, reason = [first], "around the first nemesis op"
    out = []
    for a, b in _clusters(pos)[:MAX_WINDOWS]:
        lo, hi = max(0, a - LEAD_OPS), min(len(ops), b + WINDOW_OPS + 1)
        if hi - lo > 4 * WINDOW_OPS:  # a cluster too long: keep its ends
            hi = lo + 4 * WINDOW_OPS
        chunk = ops[lo:hi]
        title = (f"Ops {lo + 1}..{hi} of {len(ops):,} ({reason}), "
                 f"{chunk[0].start * SECONDS:.3f} s .. {max(o.end for o in chunk) * SECONDS:.3f} s")
        out.append(layout(chunk, faults, title))
    return out


def _proc_sort(p: Any) -> tuple:
    return (p != NEMESIS, not isinstance(p, int), p if isinstance(p, int) else 0, str(p))


def layout(chunk: list[Op], faults: list[Fault], title: str) -> Window:
    events = sorted([(op.start, 0, i) for i, op in enumerate(chunk)] + [(op.end, 1, i) for i, op in enumerate(chunk)])
    first_row, last_row = {}, {}
    for row, (_, is_end, i) in enumerate(events):
        (last_row if is_end else first_row)[i] = row
    procs = sorted({op.process for op in chunk}, key=_proc_sort)
    col = {p: c for c, p in enumerate(procs)}
    win = Window(title, [str(p) for p in procs], height=len(events) * ROW_PX + ROW_PX)
    for i, op in enumerate(chunk):
        top, bottom = first_row[i], max(last_row[i], first_row[i])
        anchor_idx = op.invoke_index if op.invoke_index is not None else op.complete_index
        target_idx = op.complete_index if op.complete_index is not None else op.invoke_index
        css = f"op {op.type if op.type in ('ok', 'fail', 'info') else 'info'}"
        if op.process == NEMESIS:
            css += " nemesis"
        if op.ref:
            css += " referenced"
        win.boxes.append(Box(f"t-{anchor_idx}", f"op-{target_idx}", css, top * ROW_PX,
                             col[op.process] * COL_PX + 2, (bottom - top + 1) * ROW_PX - 2,
                             short_value(op), _full_title(op), op.indices))
    times = [e[0] for e in events]
    shown = [f for f in faults if not (f.end < times[0] or f.start > times[-1])]
    for fault, lane in zip(shown, lanes([(f.start, f.end) for f in shown])):
        r0 = next((r for r, t in enumerate(times) if t >= fault.start), len(times) - 1)
        r1 = next((r for r in range(len(times) - 1, -1, -1) if times[r] <= fault.end), r0)
        win.bands.append(Band(r0 * ROW_PX, max(1, r1 - r0 + 1) * ROW_PX,
                              fault.colour, fault.label, lane))
    return win

"""Choose the history lines the ops table shows.

Every line an anomaly refers to is shown, with its invocation/completion partner
and every nemesis line; a long history is filled up to a fixed budget with evenly
spaced lines, and the page says how many it left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .clock import seconds
from .ops import NEMESIS, Op

ROW_BUDGET = 3000
NEMESIS_BUDGET = 500
VALUE_CHARS = 240


@dataclass
class TableRow:
    index: Any
    time_s: str
    process: str
    type: str
    f: str
    value: str
    full_value: str
    referenced: bool


def _value_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)


def _without_wall_clock(value: Any) -> Any:
    """The value as the table shows it: a node log event's wall-clock `time` (an ISO text)
    left out, since the table's one time format is seconds since the start (the op's own
    time column); the cell's title keeps the whole value."""
    if isinstance(value, dict):
        return {k: _without_wall_clock(v) for k, v in value.items()
                if not (k == "time" and isinstance(v, str) and "T" in v and v[:4].isdigit())}
    if isinstance(value, list):
        return [_without_wall_clock(v) for v in value]
    return value


def select_rows(history: list[dict], ops: list[Op], referenced: set[int],
                also: set[int] = frozenset()) -> tuple[list[TableRow], int]:
    """(rows in history order, total lines): referenced and ``also`` lines, then a sample."""
    position = {}
    for pos, line in enumerate(history):
        idx = line.get("index")
        position[idx if isinstance(idx, int) else pos] = pos
    if len(history) <= ROW_BUDGET:
        chosen = set(range(len(history)))
    else:
        wanted = set(referenced)
        for op in ops:
            if op.ref:
                wanted.update(op.indices)
        chosen = {position[i] for i in wanted | set(also) if i in position}
        nemesis = [pos for pos, line in enumerate(history) if line.get("process") == NEMESIS]
        chosen.update(nemesis[:NEMESIS_BUDGET])
        room = ROW_BUDGET - len(chosen)
        if room > 0:
            step = len(history) / room
            chosen.update(int(k * step) for k in range(room))
    rows = []
    for pos in sorted(chosen):
        line = history[pos]
        idx = line.get("index", pos)
        text = _value_text(line.get("value"))
        shown = _value_text(_without_wall_clock(line.get("value")))
        t = line.get("time")
        rows.append(TableRow(
            index=idx, time_s=seconds(t / 1e9) if isinstance(t, (int, float)) else str(t),
            process=str(line.get("process")), type=str(line.get("type")), f=str(line.get("f")),
            value=shown if len(shown) <= VALUE_CHARS else shown[:VALUE_CHARS] + " ...",
            full_value=text[:4000], referenced=idx in referenced))
    return rows, len(history)

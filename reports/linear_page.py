"""The linearizability result as Porcupine draws it: one panel per key, one row per
process, each call a bar from its invocation to its completion.

Green bars are the longest linearizable prefix the search found (numbered in
linearization order), the red bar is the call that cannot be linearized after
it, orange bars are the calls concurrent with that one, grey bars the rest.
Hovering a bar (an SVG ``<title>``) gives the call's details; a table repeats
them.  The page needs no script, so it renders the same from ``file://``
anywhere.  ``harness check-history`` writes it; the run report reuses the panels
as its counterexample view.

Counterexamples are read from ``counterexamples`` (a list, one per invalid
key) or the single ``counterexample`` of the checkers' result; each carries
``key``, ``op`` (the call that cannot be linearized), ``linearized`` (the longest
prefix, in order), optionally ``concurrent`` and ``state``.  Ops are matched to
the history by ``index``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .render import render

WIDTH = 1100
ROW = 22
ZOOM_CALLS = 40  # a panel with more calls also gets a zoom on the last ones before the failing call
MAX_CALLS = 400  # bars per panel; a longer key is cut to a window around the failing call
COLOURS = {"prefix": "#8fd18f", "failing": "#e45756", "concurrent": "#f5a623", "other": "#d9d9d9"}


@dataclass
class Bar:
    x: float
    y: int
    width: float
    css: str
    label: str
    title: str
    open_end: bool


@dataclass
class View:
    """One drawing of calls: the whole key, or a zoom around the call that cannot be linearized."""

    title: str
    processes: list[str] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    height: int = 0
    axis: str = ""
    ticks: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Panel:
    key: Any
    valid: Any
    views: list[View] = field(default_factory=list)
    failing: dict | None = None
    concurrent: list[dict] = field(default_factory=list)
    prefix_len: int = 0
    prefix_tail: list[dict] = field(default_factory=list)
    state: str = ""
    note: str = ""

    @property
    def anchor(self) -> str:
        return "key-" + "".join(c if c.isalnum() else "-" for c in str(self.key))


def counterexamples(result: dict) -> list[dict]:
    """Every counterexample of a linearizability result, in either shape."""
    many = result.get("counterexamples")
    if isinstance(many, list):
        return [c for c in many if isinstance(c, dict)]
    if isinstance(many, dict):  # keyed by key
        return [{"key": k, **c} for k, c in many.items() if isinstance(c, dict)]
    one = result.get("counterexample")
    return [one] if isinstance(one, dict) else []


def _index(op: Any) -> int | None:
    return op.get("index") if isinstance(op, dict) and isinstance(op.get("index"), int) else None


def _calls(ops: list[dict]) -> list[dict]:
    """Client calls of a history: invocation and completion paired per process, in order."""
    open_: dict[Any, dict] = {}
    calls = []
    for pos, op in enumerate(ops):
        process = op.get("process")
        if isinstance(process, str) or not isinstance(op, dict):
            continue
        if op.get("type") == "invoke":
            call = {"process": process, "f": op.get("f"), "start": pos, "end": None, "invoke": op,
                    "complete": None, "type": "info"}
            open_[process] = call
            calls.append(call)
        elif (call := open_.pop(process, None)) is not None:
            call.update(end=pos, complete=op, type=op.get("type"))
    return calls


def _times(ops: list[dict]) -> list[float] | None:
    """Seconds of every op when all of them carry an integer ``time`` (ns), else None."""
    out = []
    for op in ops:
        t = op.get("time")
        if not isinstance(t, int) or isinstance(t, bool):
            return None
        out.append(t / 1e9)
    return out


def _describe(call: dict) -> str:
    inv, comp = call["invoke"], call["complete"]
    value = comp.get("value") if comp and call["type"] == "ok" else inv.get("value")
    return f"{call['f']} {json.dumps(value, default=str)}"


def _row(call: dict, order: dict[int, int], role: str) -> dict:
    return {"process": call["process"], "op": _describe(call), "type": call["type"],
            "invoke": _index(call["invoke"]), "complete": _index(call["complete"]),
            "order": order.get(id(call), ""), "role": role}


def _key_members(ops: list[dict], model: Any) -> dict[Any, set[int]] | None:
    """key -> history indices of the invocations of that key's calls, as the checker split them."""
    try:
        from checkers.linear.calls import calls_by_key
        from checkers.linear.models import parse_model

        return {key: {_index(c.invoke) for c in calls} for key, calls in calls_by_key(ops, parse_model(model)).items()}
    except Exception:  # noqa: BLE001 - an unknown model or shape: draw every call instead
        return None


def panel(ops: list[dict], example: dict, keyed: bool, members: set[int] | None = None) -> Panel:
    """The panel of one counterexample over the history ``ops`` (only the calls of its key
    when ``members`` gives their invocation indices)."""
    calls = _calls(ops)
    if members is not None:
        calls = [c for c in calls if _index(c["invoke"]) in members]
    by_index = {}
    for c in calls:
        for side in ("invoke", "complete"):
            if (i := _index(c[side])) is not None:
                by_index[i] = c
    failing = by_index.get(_index(example.get("op")))
    prefix = [by_index[i] for i in map(_index, example.get("linearized") or []) if i in by_index]
    order = {id(c): n + 1 for n, c in enumerate(prefix)}
    if example.get("concurrent") is not None:
        concurrent = [by_index[i] for i in map(_index, example["concurrent"]) if i in by_index]
    elif failing is not None:
        f_end = failing["end"] if failing["end"] is not None else len(ops)
        concurrent = [c for c in calls if c is not failing and c["type"] != "fail" and c["start"] <= f_end
                      and (c["end"] if c["end"] is not None else len(ops)) >= failing["start"]]
    else:
        concurrent = []
    mine = {id(c) for c in prefix} | {id(c) for c in concurrent} | ({id(failing)} if failing else set())
    shown = [c for c in calls if id(c) in mine] if keyed else calls
    note = ""
    if len(shown) > MAX_CALLS:
        centre = shown.index(failing) if failing in shown else len(shown) - 1
        lo = max(0, min(centre - MAX_CALLS // 2, len(shown) - MAX_CALLS))
        note = f"calls {lo + 1}..{lo + MAX_CALLS} of {len(shown)} drawn, around the call that cannot be linearized"
        shown = shown[lo:lo + MAX_CALLS]
    p = Panel(example.get("key"), False, failing=_row(failing, order, "failing") if failing else None,
              concurrent=[_row(c, order, "concurrent") for c in concurrent],
              prefix_len=len(example.get("linearized") or []),
              prefix_tail=[_row(c, order, "prefix") for c in prefix[-30:]],
              state=json.dumps(example.get("state"), default=str) if "state" in example else "", note=note)
    marks = {id(c) for c in concurrent}
    p.views.append(_lay_out(View("all calls" if len(shown) > ZOOM_CALLS else "calls"), shown, ops, order,
                            failing, marks))
    if len(shown) > ZOOM_CALLS and failing in shown:
        centre = shown.index(failing)
        near = shown[max(0, centre - ZOOM_CALLS + 8):centre + 8]
        p.views.append(_lay_out(View(f"zoom: the {len(near)} calls around the one that cannot be linearized"),
                                near, ops, order, failing, marks))
    return p


def _lay_out(p: View, shown: list[dict], ops: list[dict], order: dict[int, int],
             failing: dict | None, concurrent: set[int]) -> View:
    if not shown:
        return p
    times = _times(ops)
    at = (lambda pos: times[min(pos, len(times) - 1)]) if times else (lambda pos: float(pos))
    x0 = at(min(c["start"] for c in shown))
    last = max((c["end"] if c["end"] is not None else c["start"]) for c in shown)
    x1 = at(last)
    span = max(x1 - x0, 1e-9)
    scale = (WIDTH - 20) / span
    procs = sorted({c["process"] for c in shown}, key=lambda v: (not isinstance(v, int), str(v) if not isinstance(v, int) else v))
    row_of = {proc: i for i, proc in enumerate(procs)}
    p.processes = [str(x) for x in procs]
    p.height = len(procs) * ROW + 30
    p.axis = "seconds since the start" if times else "position in the history"
    p.ticks = [(10 + k * (WIDTH - 20) / 5, f"{x0 + k * span / 5:.3f}" if times else f"{x0 + k * span / 5:.0f}")
               for k in range(6)]
    for c in shown:
        if c is failing:
            css = "failing"
        elif id(c) in order:
            css = "prefix"
        elif id(c) in concurrent:
            css = "concurrent"
        else:
            css = "other"
        start = 10 + (at(c["start"]) - x0) * scale
        end = 10 + (at(c["end"] if c["end"] is not None else last) - x0) * scale
        label = f"{order[id(c)]}. " if id(c) in order else ""
        title = (f"process {c['process']}: {_describe(c)} ({c['type']}); history index "
                 f"{_index(c['invoke'])}..{_index(c['complete']) if c['complete'] else 'never completed'}"
                 + (f"; linearized as #{order[id(c)]}" if id(c) in order else "")
                 + ("; CANNOT BE LINEARIZED here" if c is failing else ""))
        p.bars.append(Bar(round(start, 1), row_of[c["process"]] * ROW + 4, round(max(end - start, 3), 1),
                          css, label + _describe(c), title, c["end"] is None))
    order_of = {"other": 0, "prefix": 1, "concurrent": 2, "failing": 3}  # SVG paints later bars on top
    p.bars.sort(key=lambda b: order_of[b.css])
    return p


def panels(ops: list[dict], result: dict) -> list[Panel]:
    examples = counterexamples(result)
    if not examples:
        return []
    keyed = int(result.get("keys") or 1) > 1
    members = _key_members(ops, result.get("model")) if keyed and result.get("model") else None
    return [panel(ops, ex, keyed and members is None, (members or {}).get(ex.get("key"))) for ex in examples]


def build_linear_page(ops: list[dict], result: dict, out: str | Path, source: str = "") -> str:
    """Write the page for ``result`` (a linearizability result over ``ops``); returns its path."""
    out = Path(out)
    context = {
        "source": source or str(result.get("file") or ""),
        "result": result,
        "verdict": {True: "linearizable", False: "NOT linearizable"}.get(result.get("valid"), "unknown"),
        "verdict_css": {True: "valid", False: "invalid"}.get(result.get("valid"), "unknown"),
        "panels": panels(ops, result),
        "colours": COLOURS,
        "width": WIDTH,
        "row": ROW,
        "facts": [(k, json.dumps(result.get(k), default=str)) for k in
                  ("model", "engine", "keys", "calls", "configs", "seconds", "invalid_keys", "unknown_keys", "reason")
                  if k in result],
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }
    out.write_text(render("linear.html.j2", context), encoding="utf-8")
    return str(out)


def page_for_file(history: str | Path, result: dict, out: str | Path | None = None) -> str:
    """The page of ``harness check-history``: beside the history (``NAME.linearizability.html``)
    unless ``out`` says where."""
    from history.formats import read_history

    history = Path(history)
    target = Path(out) if out else history.with_name(history.stem + ".linearizability.html")
    return build_linear_page(read_history(str(history)), result, target, str(history))


def summary(result: dict) -> str:
    """A few lines a person reads: the verdict, and for each counterexample the call that fails."""
    verdict = {True: "linearizable", False: "NOT linearizable"}.get(result.get("valid"), "unknown")
    lines = [f"{verdict}: model {result.get('model')}, {result.get('keys', '?')} key(s), "
             f"{result.get('calls', '?')} calls, engine {result.get('engine')}, {result.get('seconds', '?')} s"]
    for ex in counterexamples(result):
        op = ex.get("op") if isinstance(ex.get("op"), dict) else {}
        lines.append(f"  key {ex.get('key')}: after {len(ex.get('linearized') or [])} linearized calls, "
                     f"{op.get('f')} {json.dumps(op.get('value'), default=str)} by process {op.get('process')} "
                     f"(history index {op.get('index')}) cannot be linearized")
    if result.get("valid") not in (True, False) and result.get("reason"):
        lines.append(f"  reason: {result['reason']}")
    return "\n".join(lines)

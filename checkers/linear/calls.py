"""History ops -> per-key calls (P-compositionality).

A call is one client operation with the positions of its invocation and its
completion in the history.  Positions, not ``:time`` fields, give real-time
order (clocks of different processes need not agree; Knossos does the same).

- ``ok``: took effect between invocation and completion, with the
  completion's value (a read's result).
- ``fail``: never took effect: dropped.
- ``info``, or an invocation with no completion (or followed by another
  invocation of the same process): may take effect at any time after the
  invocation, or never; it keeps the invocation's value.

The model splits each call into per-key sub-calls; since a history is
linearizable iff each key's sub-history is (Herlihy & Wing's locality, the
"P-compositionality" of Horn & Kroening), each key is searched on its own.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from checkers.linear.models import Model


class Call(NamedTuple):
    """One sub-op of one key; ``complete`` is None for indefinite calls."""

    invoke_pos: int
    complete_pos: int | None
    f: str
    value: Any
    invoke: dict
    complete: dict | None


def pair_ops(ops: list[dict]) -> list[tuple[int, int | None, dict, dict | None]]:
    """Pair each client invocation with its completion: (inv pos, comp pos, inv, comp).

    Failed calls are left out; indefinite ones have comp pos None.  Nemesis
    ops (a string process) and completions with no open invocation are skipped.
    """
    open_calls: dict[Any, int] = {}
    pairs: list[list] = []
    for pos, op in enumerate(ops):
        process = op.get("process")
        if isinstance(process, str):
            continue
        kind = op["type"]
        if kind == "invoke":
            if process in open_calls:  # re-invoked: the earlier call stays indefinite
                open_calls.pop(process)
            open_calls[process] = len(pairs)
            pairs.append([pos, None, op, None])
        else:
            slot = open_calls.pop(process, None)
            if slot is None:
                continue
            if kind == "fail":
                pairs[slot] = None
            elif kind == "ok":
                pairs[slot][1] = pos
                pairs[slot][3] = op
            else:  # info: indefinite, but remember the completion for reports
                pairs[slot][3] = op
    return [tuple(p) for p in pairs if p is not None]


def calls_by_key(ops: list[dict], model: Model) -> dict[Any, list[Call]]:
    """Split a history into per-key call lists, in invocation order."""
    by_key: dict[Any, list[Call]] = {}
    for inv_pos, comp_pos, inv, comp in pair_ops(ops):
        definite = comp_pos is not None
        value = comp.get("value") if definite else None
        if value is None:  # indefinite, or an ok that did not echo its value
            value = inv.get("value")
        try:
            subs = model.split(inv["f"], value, definite)
        except (ValueError, TypeError) as err:
            raise ValueError(f"op index {inv.get('index')}: {err}") from None
        for key, f, sub_value in subs:
            by_key.setdefault(key, []).append(Call(inv_pos, comp_pos, f, sub_value, inv, comp))
    return by_key

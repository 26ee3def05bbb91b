"""The Wing-Gong linearizability search with Lowe's cache, for one key.

Calls become call/return entries in a doubly linked list ordered by history
position; indefinite calls (``info`` or never completed) return "at
infinity", after every definite return.  The search repeatedly tries the
call entries that precede the first return entry: it applies one to the
model, lifts it out of the list, and starts again from the head; when it
reaches a return entry whose call is still unlinearized it backtracks.  It
succeeds when every definite call is linearized (indefinite calls may or may
not have taken effect).  Lowe's improvement: a (linearized set, state) pair
already explored is never explored again; the set is a bitset in a Python
int.  A deadline and a cap on cached configurations turn a search that is
too large into an ``unknown`` verdict instead of a hang.

Windows: where every call invoked so far has completed (none indefinite)
before the next is invoked, the search cannot be inside a call, so it goes
through the calls window by window, and never comes back into a window once
it has left it but to fail (its configurations at the cut are cached). So a
key is searched window by window, each with its own small bitset, from the
state the previous window ended in; a window of one call is just a step
(a key whose calls never overlap is stepped through in real-time order).
Same exploration, so the same valid verdict and counts; if a window fails
from that state, the whole key is searched again as one (only that gives
the counterexample and the counts of the backtracking into earlier windows).

The counterexample is taken at the furthest point of the history the
search reached: the call whose completion it could not get past (no order
of the calls before it lets this one take effect in time), and the longest
partial linearization that got there.
"""
from __future__ import annotations

import time
from typing import Any

from checkers.linear.calls import Call
from checkers.linear.models import INCONSISTENT, Model

DEFAULT_MAX_CONFIGS = 2_000_000
MEMORY_BUDGET = 512 << 20
"""Bytes the cache may take (estimated); beyond it the verdict is unknown."""
_CHECK_EVERY = 1024


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list, frozenset, set)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (frozenset, set)) else items
    return value


OP_FIELDS = ("index", "process", "type", "f", "value", "invoke", "complete")
"""A call's op may come as a tuple of these (`checkers.linearizability.key_calls`): millions
of calls need no dict each when only a counterexample's few are ever shown."""


def _op_summary(call: Call) -> dict:
    """The history op behind a call, plus the per-key sub-op the model checked."""
    op = call.complete if call.complete is not None else call.invoke
    if isinstance(op, tuple):
        op = dict(zip(OP_FIELDS, op))
    out = {k: op[k] for k in OP_FIELDS if k in op}
    if call.complete is None or call.complete_pos is None:
        out["type"] = "info" if call.complete is not None else "invoke"
    out["checked"] = [call.f, _jsonable(call.value)]
    return out


def _earlier_twins(calls: list[Call]) -> list[int]:
    """For each indefinite call, the previous indefinite call with the same op, or -1.

    Two indefinite calls with equal (f, value) are interchangeable, and the
    earlier-invoked one can take effect anywhere the later one can; so the
    later one is only tried once its earlier twin has been linearized.  With
    many crashed writes of few distinct values this collapses 2^k subsets
    into per-value counts.
    """
    last: dict[Any, int] = {}
    twin = [-1] * len(calls)
    order = sorted(range(len(calls)), key=lambda k: calls[k].invoke_pos)
    for k in order:
        call = calls[k]
        if call.complete_pos is not None:
            continue
        try:
            ident = (call.f, call.value)
            twin[k] = last.get(ident, -1)
            last[ident] = k
        except TypeError:  # an unhashable value: no symmetry pruning for it
            continue
    return twin


def windows(calls: list[Call]) -> list[list[int]]:
    """Call indices cut into windows: a window ends where every call invoked so far has
    completed (none indefinite) before the next call is invoked. In list order inside."""
    order = sorted(range(len(calls)), key=lambda i: calls[i].invoke_pos)
    out: list[list[int]] = []
    done = None  # latest completion so far; "open" once an indefinite call is in
    for i in order:
        call = calls[i]
        if out and done != "open" and call.invoke_pos > done:
            out[-1].sort()
            out.append([i])
        elif out:
            out[-1].append(i)
        else:
            out.append([i])
        if call.complete_pos is None or done == "open":
            done = "open"
        elif done is None or call.complete_pos > done:
            done = call.complete_pos
    if out:
        out[-1].sort()
    return out


def _by_windows(model: Model, calls: list[Call], deadline: float | None,
                max_configs: int) -> dict | None:
    """The valid result, searched window by window; None if some window fails or stops."""
    state = model.initial()
    configs = 1
    bad = INCONSISTENT
    for window in windows(calls):
        if deadline is not None and time.monotonic() > deadline:
            return None  # the whole search then says unknown, as it would have
        call = calls[window[0]]
        if len(window) == 1 and call.complete_pos is not None \
                and call.complete_pos >= call.invoke_pos:
            state = model.step(state, call.f, call.value)
            if state is bad:
                return None
            configs += 1
            continue
        found, state = _search(model, [calls[i] for i in window], deadline, max_configs, state)
        if found["valid"] is not True:
            return None
        configs += found["configs"] - 1
    return {"valid": True, "calls": len(calls), "configs": configs}


def check_calls(
    model: Model,
    calls: list[Call],
    deadline: float | None = None,
    max_configs: int = DEFAULT_MAX_CONFIGS,
) -> dict:
    """Search one key's calls.  Returns ``{"valid": True|False|"unknown", ...}``.

    ``deadline`` is a ``time.monotonic()`` value; ``max_configs`` caps the
    cache (also capped by ``MEMORY_BUDGET``).  Invalid results carry
    ``op`` (the call that cannot be linearized), ``linearized`` (the longest
    partial linearization, in order), ``concurrent`` (the calls whose intervals
    overlap the failed one's) and ``state`` (the model state after the prefix).
    """
    if not calls:
        return {"valid": True, "calls": 0, "configs": 0}
    return (_by_windows(model, calls, deadline, max_configs)
            or search(model, calls, deadline, max_configs))


def search(model: Model, calls: list[Call], deadline: float | None = None,
           max_configs: int = DEFAULT_MAX_CONFIGS) -> dict:
    """The WGL search over all calls at once (`check_calls` without windows)."""
    if not calls:
        return {"valid": True, "calls": 0, "configs": 0}
    return _search(model, calls, deadline, max_configs, model.initial())[0]


def _search(model: Model, calls: list[Call], deadline: float | None, max_configs: int,
            state: Any) -> tuple[dict, Any]:
    """The search from `state`; -> (result, the state a valid search ended in)."""
    n = len(calls)
    # a cached config costs a set slot, a tuple and an n-bit int: ~120 + n/8 bytes
    max_configs = min(max_configs, MEMORY_BUDGET // (120 + n // 8))
    # Entries: 0 is the head; call i has entry 2i+1 (call) and 2i+2 (return).
    events = []
    infinity = float("inf")
    for i, c in enumerate(calls):
        events.append((c.invoke_pos, 0, 2 * i + 1))
        end = c.complete_pos if c.complete_pos is not None else infinity
        events.append((end, 1, 2 * i + 2))
    events.sort()
    size = 2 * n + 1
    nxt = [-1] * size
    prv = [-1] * size
    last = 0
    for _, _, entry in events:
        nxt[last] = entry
        prv[entry] = last
        last = entry
    nxt[last] = -1

    fs = [c.f for c in calls]
    values = [c.value for c in calls]
    indefinite = [c.complete_pos is None for c in calls]
    twin = _earlier_twins(calls)
    step = model.step
    bad = INCONSISTENT

    linearized = 0
    stack: list[tuple[int, Any]] = []  # (call entry, state before it)
    cache = {(0, state)}
    best_reach = (-1, -1)
    best: tuple[list[int], int, Any] | None = None
    steps = 0
    entry = nxt[0]
    while entry != -1:
        steps += 1
        if steps % _CHECK_EVERY == 0:
            if deadline is not None and time.monotonic() > deadline:
                return {"valid": "unknown", "reason": "time-limit", "calls": n,
                        "configs": len(cache)}, None
            if len(cache) > max_configs:
                return {"valid": "unknown", "reason": "memory-limit", "calls": n,
                        "configs": len(cache)}, None
        i = (entry - 1) >> 1
        if entry & 1:  # a call entry
            j = twin[i]
            if j >= 0 and not (linearized >> j) & 1:
                entry = nxt[entry]  # symmetric to linearizing its earlier twin instead
                continue
            new_state = step(state, fs[i], values[i])
            if new_state is not bad:
                new_lin = linearized | (1 << i)
                config = (new_lin, new_state)
                if config not in cache:
                    cache.add(config)
                    stack.append((entry, state))
                    state, linearized = new_state, new_lin
                    # lift the call and its return out of the list
                    ret = entry + 1
                    p, q = prv[entry], nxt[entry]
                    nxt[p] = q
                    if q != -1:
                        prv[q] = p
                    p, q = prv[ret], nxt[ret]
                    nxt[p] = q
                    if q != -1:
                        prv[q] = p
                    entry = nxt[0]
                    continue
            entry = nxt[entry]
        else:  # a return entry of a call not yet linearized
            if indefinite[i]:
                return {"valid": True, "calls": n, "configs": len(cache)}, state
            reach = (calls[i].complete_pos, len(stack))
            if reach > best_reach:
                best_reach = reach
                best = ([(e - 1) >> 1 for e, _ in stack], i, state)
            if not stack:
                break
            entry, state = stack.pop()
            j = (entry - 1) >> 1
            linearized &= ~(1 << j)
            # unlift, in reverse order of lifting
            ret = entry + 1
            p, q = prv[ret], nxt[ret]
            nxt[p] = ret
            if q != -1:
                prv[q] = ret
            p, q = prv[entry], nxt[entry]
            nxt[p] = entry
            if q != -1:
                prv[q] = entry
            entry = nxt[entry]
    if entry == -1:
        return {"valid": True, "calls": n, "configs": len(cache)}, state
    order, failed, final_state = best
    return {
        "valid": False,
        "calls": n,
        "configs": len(cache),
        "op": _op_summary(calls[failed]),
        "linearized": [_op_summary(calls[k]) for k in order],
        "concurrent": [_op_summary(calls[k]) for k in _concurrent(calls, failed)],
        "state": model.describe(final_state),
    }, None


MAX_CONCURRENT = 50


def _concurrent(calls: list[Call], failed: int) -> list[int]:
    """Calls whose invocation-completion interval overlaps the failed call's (an
    indefinite call's interval never ends), in invocation order, at most MAX_CONCURRENT."""
    infinity = float("inf")
    start = calls[failed].invoke_pos
    end = calls[failed].complete_pos if calls[failed].complete_pos is not None else infinity
    overlapping = sorted(
        (c.invoke_pos, k) for k, c in enumerate(calls)
        if k != failed and c.invoke_pos <= end
        and (c.complete_pos if c.complete_pos is not None else infinity) >= start)
    return [k for _pos, k in overlapping[:MAX_CONCURRENT]]

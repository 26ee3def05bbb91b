"""Histories for the linearizability tests: simulated objects and a brute-force oracle.

The simulators run concurrent processes against a real sequential object;
each op takes effect at one instant between its invocation and completion,
so every history they produce is linearizable by construction.  Processes
may crash (the op ends in ``info``, before or after taking effect, and the
process gets a new id as in Jepsen), may never complete, and ops that did
not take effect may end in ``fail``.
"""
from __future__ import annotations

import functools
import itertools
from typing import Any

from hypothesis import strategies as st


@st.composite
def register_histories(draw, cas: bool = True, processes: int = 3, max_steps: int = 40,
                       initial: int = 0, values: int = 5, settle: bool = False) -> list[dict]:
    """A history of a simulated (cas-)register.

    ``settle``: no crashes, and every call still open at the end takes effect
    and completes, so the final state is known (no indefinite writes).
    """
    state = initial
    ops: list[dict] = []
    pids = list(range(processes))
    next_pid = processes
    pending: dict[int, dict] = {}  # slot -> {"pid", "f", "value", "applied", "result"}
    fs = ["read", "write", "cas"] if cas else ["read", "write"]

    def emit(pid, kind, f, value):
        ops.append({"index": len(ops), "process": pid, "type": kind, "f": f, "value": value})

    def apply(call, state):
        call["applied"] = True
        f, value = call["f"], call["value"]
        if f == "read":
            call["result"] = state
        elif f == "write":
            state = value
        elif state == value[0]:
            state = value[1]
        else:
            call["result"] = "failed-cas"
        return state

    def complete(pid, call):
        if call["result"] == "failed-cas":
            emit(pid, "fail", call["f"], call["value"])
        elif call["f"] == "read":
            emit(pid, "ok", "read", call["result"])
        else:
            emit(pid, "ok", call["f"], call["value"])

    for _ in range(draw(st.integers(0, max_steps))):
        slot = draw(st.integers(0, processes - 1))
        pid = pids[slot]
        call = pending.get(slot)
        if call is None:
            f = draw(st.sampled_from(fs))
            if f == "read":
                value = None
            elif f == "write":
                value = draw(st.integers(0, values - 1))
            else:
                value = [draw(st.integers(0, values - 1)), draw(st.integers(0, values - 1))]
            pending[slot] = {"pid": pid, "f": f, "value": value, "applied": False, "result": None}
            emit(pid, "invoke", f, value)
            continue
        action = draw(st.sampled_from(["apply", "complete"] if settle else ["apply", "complete", "crash"]))
        if action == "apply" and not call["applied"]:
            state = apply(call, state)
        elif action == "complete" and call["applied"]:
            del pending[slot]
            complete(pid, call)
        elif action == "complete":  # not applied: a definite failure
            del pending[slot]
            emit(pid, "fail", call["f"], call["value"])
        elif action == "crash":
            del pending[slot]
            emit(pid, "info", call["f"], call["value"])
            pids[slot] = next_pid
            next_pid += 1
    if settle:
        for slot in sorted(pending):
            call = pending[slot]
            if not call["applied"]:
                state = apply(call, state)
            complete(pids[slot], call)
    return ops  # unless settled, still-pending calls never complete


@st.composite
def log_histories(draw, keys: int = 2, processes: int = 3, max_steps: int = 40) -> list[dict]:
    """A history of simulated per-key logs with Kafka-style send/poll ops."""
    logs: dict[int, list[int]] = {k: [] for k in range(keys)}
    ops: list[dict] = []
    pending: dict[int, dict] = {}
    pids = list(range(processes))
    next_pid = processes
    next_value = itertools.count(100)

    def emit(pid, kind, f, value):
        ops.append({"index": len(ops), "time": len(ops) * 1000, "process": pid, "type": kind,
                    "f": f, "value": value})

    for _ in range(draw(st.integers(0, max_steps))):
        slot = draw(st.integers(0, processes - 1))
        pid = pids[slot]
        call = pending.get(slot)
        if call is None:
            if draw(st.booleans()):
                key = draw(st.integers(0, keys - 1))
                call = {"f": "send", "value": [key, next(next_value)], "applied": False}
            else:
                call = {"f": "poll", "value": None, "applied": False}
            pending[slot] = call
            emit(pid, "invoke", call["f"], call["value"])
            continue
        action = draw(st.sampled_from(["apply", "complete", "crash"]))
        if action == "apply" and not call["applied"]:
            call["applied"] = True
            if call["f"] == "send":
                key, value = call["value"]
                call["result"] = [key, [len(logs[key]), value]]
                logs[key].append(value)
            else:
                result = {}
                for key in range(keys):
                    start = draw(st.integers(0, len(logs[key])))
                    end = draw(st.integers(start, len(logs[key])))
                    result[str(key)] = [[o, logs[key][o]] for o in range(start, end)]
                call["result"] = result
        elif action == "complete" and call["applied"]:
            del pending[slot]
            emit(pid, "ok", call["f"], call["result"])
        elif action == "complete" and call["f"] == "send":
            del pending[slot]
            emit(pid, "fail", "send", call["value"])
        elif action == "crash":
            del pending[slot]
            emit(pid, "info", call["f"], call["value"])
            pids[slot] = next_pid
            next_pid += 1
    return ops


def _brute_force(ops: list[dict], initial: Any, apply, effective) -> bool:
    """Exhaustive search over orders consistent with real time (small histories only).

    Written independently of checkers.linear: pairs ops itself, tries every
    order, and lets indefinite calls be skipped.  ``effective(f, value,
    definite)`` gives the sub-op or None (no constraint); ``apply(state, sub)``
    gives (ok, new state).
    """
    calls = []  # [inv, comp or inf, invoke op, completion op or None, not failed]
    open_by_pid: dict[Any, int] = {}
    for pos, op in enumerate(ops):
        pid = op["process"]
        if op["type"] == "invoke":
            open_by_pid[pid] = len(calls)
            calls.append([pos, float("inf"), op, None, True])
        elif pid in open_by_pid:
            slot = open_by_pid.pop(pid)
            if op["type"] == "ok":
                calls[slot][1] = pos
                calls[slot][3] = op
            elif op["type"] == "fail":
                calls[slot][4] = False
    subs = []
    for inv, comp, iop, cop, alive in calls:
        if not alive:
            continue
        definite = cop is not None
        sub = effective(iop["f"], cop["value"] if definite else iop["value"], definite)
        if sub is not None:
            subs.append((inv, comp, sub))

    @functools.lru_cache(maxsize=None)
    def search(remaining: frozenset, state) -> bool:
        if all(subs[i][1] == float("inf") for i in remaining):
            return True
        earliest_completion = min(subs[i][1] for i in remaining)
        for i in remaining:
            inv, comp, sub = subs[i]
            if inv > earliest_completion:
                continue  # some remaining call completed before this one began
            ok, new_state = apply(state, sub)
            if ok and search(remaining - {i}, new_state):
                return True
            if comp == float("inf") and search(remaining - {i}, state):
                return True  # an indefinite call that never took effect
        return False

    return search(frozenset(range(len(subs))), initial)


def brute_force_register(ops: list[dict], initial: Any = 0) -> bool:
    """Linearizable as a cas-register?"""
    def effective(f, value, definite):
        if f == "read" and value is None:
            return None
        return (f, tuple(value) if isinstance(value, list) else value)

    def apply(state, sub):
        f, value = sub
        if f == "read":
            return value == state, state
        if f == "write":
            return True, value
        return state == value[0], value[1]

    return _brute_force(ops, initial, apply, effective)


def brute_force_log(ops: list[dict]) -> bool:
    """Linearizable as one append-only log (key 0), as the log model defines it?"""
    def effective(f, value, definite):
        if f == "send":
            return ("append", value[1][0], value[1][1]) if definite else ("append", None, value[1])
        if f == "poll" and definite:
            records = value.get("0") or value.get(0) or []
            return ("read", tuple((o, v) for o, v in records)) if records else None
        return None

    def apply(state, sub):
        if sub[0] == "append":
            _, offset, value = sub
            return offset is None or offset == len(state), state + (value,)
        return all(o < len(state) and state[o] == v for o, v in sub[1]), state

    return _brute_force(ops, (), apply, effective)

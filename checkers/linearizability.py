"""Linearizability of a log history: the `linearizability` checker of every store check.

The history is split by key (a history is linearizable iff every key's
sub-history is: Herlihy and Wing's locality, P-compositionality) and each
key is searched with the WGL kernel (`checkers.linear.wgl`) against the
`log` model (`checkers.linear.models.Log`):

- an ok send is an append that lands exactly at its acknowledged offset; an
  info send (or one never completed) may land once at an offset nobody else
  holds, or never; a failed send never happened;
- an ok poll's records of one key are a read: at one instant the log holds
  those values at those offsets (skipping no offset anybody observed);
- the end of a key (`history.flatten` ends: where the final consumer stood
  after its last poll of the key) asserts the log's length at that instant.

Against the log checker (`checkers.log_anomalies`): a lost-write, unseen or
inconsistent-offsets finding is a key no order of ops explains (the
acknowledged value is not where the reads or the end say), and a history the
log checker passes is linearizable; the suite holds both directions on every
history it builds (tests/checkers/test_linearizability.py).

Both engines build a key's calls from the same flat rows with `key_calls`, so
they agree by construction: the local engine groups the rows in Python; the
Spark engine groups the Parquet tables by key and runs the search in Python
workers (`applyInArrow`), keys spread over the executors. A time limit
(`time_limit`, default DEFAULT_TIME_LIMIT or $CHECKERS_LINEAR_TIME_LIMIT)
stops every key's search when it passes; keys not finished are "unknown".

Result (`results.json` `checkers.linearizability`, docs/interfaces.md):
valid, model, keys, calls, configs, seconds, time_limit,
invalid_keys / unknown_keys / reason, and `counterexamples`: per invalid key
(the first MAX_COUNTEREXAMPLES in key order) `key`, `op` (the call that
cannot be linearized), `linearized` (the longest linearizable prefix, in
order), `concurrent` (calls overlapping `op`), `state` (the log after the
prefix). Each call: index (its completion, or its invocation if it never
completed), invoke, complete, process, type, f, value, checked (the sub-op
the model stepped), and invoke_time / complete_time (ns since the start)
when the store's history is at hand.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import Any, Iterable

from history.flatten import decode_value
from checkers.linear.calls import Call
from checkers.linear.log_columns import check_columns
from checkers.linear.history_local import merge_results
from checkers.linear.models import Log
from checkers.linear.wgl import check_calls

MODEL = "log"
DEFAULT_TIME_LIMIT = 120.0


def time_limit_default() -> float:
    return float(os.environ.get("CHECKERS_LINEAR_TIME_LIMIT", DEFAULT_TIME_LIMIT))


def _op(index: int, process: str, kind: str, f: str, value: Any, invoke: int,
        complete: int | None) -> tuple:
    """A call's op in `wgl.OP_FIELDS` order (a dict only if a counterexample shows it)."""
    return (index, process, kind, f, value, invoke, complete)


def key_calls(key: int, sends: Iterable[tuple], reads: Iterable[tuple],
              end: tuple | None) -> list[Call]:
    """The calls of one key, in invocation order.

    sends: (value, offset, type, process, invoke_index, complete_index) as in
    history.flatten's send rows without the key; reads: (offset, value,
    process, index, invoke_index); end: (end_offset, invoke_index,
    complete_index) or None. Values are canonical JSON texts (both engines
    compare the same texts).
    """
    calls = []
    for value, offset, kind, process, inv, done in sends:
        if kind == "fail":
            continue
        invoke = _op(inv, process, "invoke", "send", [key, value], inv, done)
        if kind == "ok" and offset is not None:
            complete = _op(done, process, "ok", "send", [key, [offset, value]], inv, done)
            calls.append(Call(inv, done, "append", (offset, value), invoke, complete))
        else:  # indefinite: may land anywhere, once, or never
            complete = None if done is None else _op(done, process, "info", "send", [key, value],
                                                     inv, done)
            calls.append(Call(inv, None, "append", (None, value), invoke, complete))
    polls: dict[tuple, list] = defaultdict(list)
    for offset, value, process, index, inv in reads:
        polls[(index, inv, process)].append((offset, value))
    for (index, inv, process), records in polls.items():
        records.sort(reverse=True)
        calls.append(Call(inv, index, "read", tuple(records),
                          _op(inv, process, "invoke", "poll", None, inv, index),
                          _op(index, process, "ok", "poll", {key: records}, inv, index)))
    if end is not None:
        length, inv, done = end
        calls.append(Call(inv, done, "end", length,
                          _op(inv, "final", "invoke", "poll", None, inv, done),
                          _op(done, "final", "ok", "poll", {key: []}, inv, done)))
    calls.sort(key=lambda c: c.invoke_pos)
    return calls


def check_key(key: int, sends, reads, end, deadline_epoch: float | None,
              columns: tuple | None = None) -> dict:
    """Search one key; the deadline travels as wall-clock time (it crosses processes).

    columns: the same rows as `checkers.linear.log_columns.check_columns`'s columns, if the
    caller has them (the Spark worker's Arrow group); sends and reads may then be callables
    that build the row lists, called only if the key needs the whole search."""
    deadline = None
    if deadline_epoch is not None:
        deadline = time.monotonic() + (deadline_epoch - time.time())
    if columns is None:
        columns = _columns(sends, reads)
    found = check_columns(*columns, end, deadline)
    if found is not None:  # proven valid from the columns, counted as the search counts
        return found
    if callable(sends):
        sends, reads = sends(), reads()
    model = Log()
    calls = model.prepare(key_calls(key, sends, reads, end))
    found = check_calls(model, calls, deadline=deadline)
    if found["valid"] is False:  # values travel as JSON texts; show them as values
        found["state"] = [decode_value(v) for v in found["state"]]
        for op in [found["op"], *found["linearized"], *found["concurrent"]]:
            _decode_op(op)
    return found


def _columns(sends: list[tuple], reads: list[tuple]) -> tuple:
    """key_calls' row lists -> check_columns' columns (send value, offset, type, invoke,
    complete; read offset, value, completion, invoke)."""
    return (*([row[i] for row in sends] for i in (0, 1, 2, 4, 5)),
            *([row[i] for row in reads] for i in (0, 1, 3, 4)))


def _decode_op(op: dict) -> None:
    """Turn the JSON texts in a summarised call back into values (only the few listed)."""
    value, f = op.get("value"), op.get("f")
    if f == "send" and isinstance(value, list):
        key, body = value
        op["value"] = ([key, [body[0], decode_value(body[1])]] if isinstance(body, list)
                       else [key, decode_value(body)])
    elif f == "poll" and isinstance(value, dict):
        op["value"] = {str(key): [[o, decode_value(v)] for o, v in sorted(records)]
                       for key, records in value.items()}  # JSON keys, as results.json has them


def result(per_key: list[tuple[int, dict]], engine: str, seconds: float,
           time_limit: float | None, settled: tuple[int, int, int] = (0, 0, 0)) -> dict:
    """Per-key verdicts -> the checker result (the same merge as `harness check-history`).

    settled: (keys, calls, configs) of keys found linearizable without a search
    (`checkers.spark.sequential`), counted as the search would count them."""
    per_key = sorted(per_key, key=lambda item: item[0])
    merged = merge_results(per_key, MODEL, engine)
    for name, count in zip(("keys", "calls", "configs"), settled):
        merged[name] += count
    merged.pop("counterexample", None)  # results.json lists them all under counterexamples
    merged.pop("engine")  # results.json names the engine once, at the top
    merged["seconds"] = round(seconds, 3)
    merged["time_limit"] = time_limit
    if merged["valid"] == "unknown" and "reason" in merged:
        merged["reason"] = [f"{r} ({time_limit:g} s)" if r == "time-limit" else r
                            for r in merged["reason"]]
    return merged


def check_flat(sends: list[tuple], reads: list[tuple], ends: list[tuple],
               time_limit: float | None = None) -> dict:
    """In-process engine over the flat rows of `history.flatten` (all keys, one by one)."""
    started = time.monotonic()
    limit = time_limit_default() if time_limit is None else time_limit
    deadline_epoch = time.time() + limit
    per_key = [(key, check_key(key, *rows, deadline_epoch))
               for key, rows in flat_keys(sends, reads, ends)]
    return result(per_key, "local", time.monotonic() - started, limit)


def flat_keys(sends: list[tuple], reads: list[tuple], ends: list[tuple]):
    """-> [(key, (sends, reads, end))] in key order: the arguments of `key_calls` per key."""
    by_key: dict[int, tuple[list, list, Any]] = defaultdict(lambda: ([], [], None))
    for key, value, offset, kind, process, inv, done in sends:
        by_key[key][0].append((value, offset, kind, process, inv, done))
    for key, offset, value, process, index, _pos, _session, inv, _final in reads:
        by_key[key][1].append((offset, value, process, index, inv))
    ends_by_key = {row[0]: tuple(row[1:4]) for row in ends}
    return [(key, (by_key[key][0], by_key[key][1], ends_by_key.get(key)))
            for key in sorted(set(by_key) | set(ends_by_key))]


def same_verdicts(checkers: dict) -> dict:
    """The checkers' results without the linearizability search's `seconds` and the
    verdict's time to first anomaly (`first_s`, added from the history after either
    engine: harness/verdict.first_times): what both engines must give identically."""
    out = {name: ({k: v for k, v in sec.items() if k != "first_s"} if isinstance(sec, dict) else sec)
           for name, sec in checkers.items()}
    if "linearizability" in out:
        out["linearizability"] = {k: v for k, v in out["linearizability"].items() if k != "seconds"}
    return out


def counterexample_indices(found: dict) -> set[int]:
    """History indices of every call a result's counterexamples list."""
    out = set()
    for example in found.get("counterexamples") or []:
        for op in [example["op"], *example["linearized"], *example["concurrent"]]:
            out.update(i for i in (op.get("invoke"), op.get("complete")) if i is not None)
    return out


def add_times(found: dict, times: dict[int, int]) -> None:
    """Put invoke_time / complete_time (ns since the start) on every counterexample call."""
    for example in found.get("counterexamples") or []:
        for op in [example["op"], *example["linearized"], *example["concurrent"]]:
            op["invoke_time"] = times.get(op.get("invoke"))
            op["complete_time"] = times.get(op.get("complete"))


def _declare():
    from checkers.checker import Checker

    return Checker("linearizability", "the history against the log model, per key (WGL search)",
                   lambda data: check_flat(data.sends, data.reads, data.ends),
                   spark="checkers.spark.linearizability")


CHECKER = _declare()

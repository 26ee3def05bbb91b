"""The `linearizability` store checker's Spark driver: every key searched in the key pass.

Same calls, search and result as `checkers.linearizability` (whose `check_key` runs
here, in the Python workers): the engine's key pass (`checkers.spark.key_pass`) hands
each task its keys' rows of the sends, reads and ends of every run (read once with
pyarrow, shared with the log checker and the replica diff: no row of them in the JVM);
the task groups them by k (run, key) and hands each key to the search as one Arrow
table. Only one JSON text per key comes back to the driver.

Every key is searched: a key whose calls never overlap steps through the search's
columnar fast path (`checkers.linear.log_columns`) in milliseconds. Until 2026-11-30
such keys were settled in the JVM by a window over each key's calls, which needed the
triples T (~40 JVM CPU-s at 10M ops); searching all 1,000 keys of the bench's
sequential 10M-op store costs ~12 CPU-s (docs/performance.md, issue 40).
"""

from __future__ import annotations

import functools
import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkers.linearizability import check_key, result, time_limit_default
from checkers.spark.key_pass import KeyWork, run_pass
from checkers.spark.tables import KEY_SPAN, Tables, key_in_run

SEND, READ, END = 0, 1, 2


# The search's columns from each table: kind, then output column -> the table's column
# (None: null text in every row; only value, type and process are ever None).
CALL_COLUMNS = {
    "sends": (SEND, {"value": "value", "offset": "offset", "type": "type", "process": "process",
                     "a": "invoke_index", "b": "complete_index"}),
    "reads": (READ, {"value": "value", "offset": "offset", "type": None, "process": "process",
                     "a": "invoke_index", "b": "index"}),
    "ends": (END, {"value": None, "offset": "end_offset", "type": None, "process": None,
                   "a": "invoke_index", "b": "complete_index"}),
}


def _as_calls(rid: int, table: str, t: pa.Table) -> pa.Table:
    """One table's rows as the search's columns (CALL_COLUMNS), with k."""
    kind, columns = CALL_COLUMNS[table]
    return pa.table({
        "k": pc.add(t["key"], rid * KEY_SPAN), "kind": pa.array(np.full(t.num_rows, kind, np.int8)),
        **{out: t[name] if name is not None else pa.nulls(t.num_rows, pa.string())
           for out, name in columns.items()}})


def _by_key(parts: list[pa.Table]) -> pa.Table:
    """The call rows grouped by k (a stable sort: each key's rows keep the tables' order)."""
    table = pa.concat_tables(parts)
    return table.take(np.argsort(table.column("k").to_numpy(), kind="stable"))


def _search_groups(table: pa.Table, search):
    """Each key's rows of a table grouped by k -> the search's {k, found} rows."""
    k = table.column("k").to_numpy()
    starts = np.concatenate(([0], np.flatnonzero(np.diff(k)) + 1, [len(k)]))
    for start, stop in zip(starts[:-1], starts[1:]):
        if stop > start:
            yield search(table.slice(int(start), int(stop - start))).to_pylist()[0]


def _searcher(deadline_epoch: float):
    def search(group: pa.Table) -> pa.Table:
        k = group.column("k")[0].as_py()
        kind = group.column("kind").to_numpy()
        sends, reads = np.flatnonzero(kind == SEND), np.flatnonzero(kind == READ)
        ends = np.flatnonzero(kind == END)
        end = None
        if len(ends):
            row = group.slice(int(ends[-1]), 1).to_pylist()[0]
            end = (row["offset"], row["a"], row["b"])
        s, r = group.take(sends), group.take(reads)
        # the columns go to the search's fast path (checkers.linear.log_columns); the row
        # lists are built only for a key it leaves to the whole search
        columns = (s.column("value"), s.column("offset"), s.column("type"), s.column("a"),
                   s.column("b"), r.column("offset"), r.column("value"), r.column("b"),
                   r.column("a"))
        found = check_key(key_in_run(k), lambda: _send_rows(s), lambda: _read_rows(r), end,
                          deadline_epoch, columns=columns)
        return pa.table({"k": [k], "found": [json.dumps(found, default=str)]})
    return search


def _send_rows(table: pa.Table) -> list[tuple]:
    c = table.to_pydict()
    return list(zip(c["value"], c["offset"], c["type"], c["process"], c["a"], c["b"]))


def _read_rows(table: pa.Table) -> list[tuple]:
    c = table.to_pydict()
    return list(zip(c["offset"], c["value"], c["process"], c["b"], c["a"]))


def _key_search(deadline_epoch: float, rid: int, rows: dict) -> list[dict]:
    """The key pass's kernel: search every key of one run's rows of the task -> [{k, found}]."""
    table = _by_key([_as_calls(rid, table, rows[table]) for table in CALL_COLUMNS])
    return list(_search_groups(table, _searcher(deadline_epoch))) if table.num_rows else []


def key_work(job):
    """The search's part of the engine's key pass."""
    return _work(job.runs, job.time_limit)


def _work(runs: list[str], time_limit: float | None):
    """Every key of the task searched until a deadline. The limit is each run's, as in the local
    engine: a job of many runs (a campaign's final check) has their sum. One shared 120 s
    for 20 runs of a loaded campaign left 16 of them unknown (2026-11-28,
    false-alarms-kafka-membership at load 25) that each run's own check had decided valid."""
    deadline = time.time() + _limit(time_limit) * max(1, len(runs))
    return KeyWork(("sends", "reads", "ends"), functools.partial(_key_search, deadline))


def _limit(time_limit: float | None) -> float:
    return time_limit_default() if time_limit is None else time_limit


def check(job) -> dict[str, dict]:
    """The linearizability checker's Spark driver (checkers.spark.engine)."""
    started = time.monotonic()
    return results(job.runs, job.keyed("linearizability"), started, _limit(job.time_limit))


def check_runs(tables: Tables, time_limit: float | None = None) -> dict[str, dict]:
    """-> {run: linearizability result} for every run of `tables`: a key pass of its own
    (the engine's check shares one with the other checkers)."""
    started = time.monotonic()
    found = run_pass(tables, {"linearizability": _work(tables.runs, time_limit)})["linearizability"]
    return results(tables.runs, found, started, _limit(time_limit))


def results(runs: list[str], passed: list, started: float, limit: float) -> dict[str, dict]:
    """The key pass's answers ([(rid, [{k, found}])]) -> {run: result}."""
    per_run: dict[str, list] = {run: [] for run in runs}
    for rid, rows in passed:
        per_run[runs[rid]] += [(key_in_run(row["k"]), json.loads(row["found"])) for row in rows]
    seconds = time.monotonic() - started
    return {run: result(per_key, "spark", seconds, limit) for run, per_key in per_run.items()}

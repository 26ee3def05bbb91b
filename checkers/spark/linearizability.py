"""The `linearizability` store checker's Spark driver: keys spread over the executors.

Same calls, search and result as `checkers.linearizability` (whose
`key_calls` and `check_key` run here, in the Python workers): the keys to
search are dealt to one Spark task per core; each task reads its keys' rows of
the sends, reads and ends tables with pyarrow (columnar, no row of them in the
JVM), groups them by k (run, key) and hands each key to the search as one Arrow
table. Only one JSON text per key comes back to the driver.

Keys whose calls are in plain real-time order and legal
(`checkers.spark.sequential`) are decided in the JVM and never shipped: only
their count, calls and configs per run come back. They are most keys of a
quiet run and every key of the bench's sequential history.
"""

from __future__ import annotations

import functools
import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from history.parquet import SCHEMAS, table_paths
from checkers.linearizability import check_key, result, time_limit_default
from checkers.spark.sequential import search_all, settled_rows
from checkers.spark.tables import KEY_SPAN, Tables, key_in_run, run_id

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


def _key_rows(run_dirs: list[str], runs: list[str], ks: list[int]) -> pa.Table:
    """k, kind, value, offset, type, process, a (invocation), b (completion) of every call
    row of the keys `ks`, read from the runs' Parquet tables by pyarrow, grouped by k (a
    stable sort: each key's rows keep the tables' order: sends, reads, its end).

    Every read goes: the first search is the whole one, so an invalid key's counterexample
    shows whole polls without a second search. Read here, in the Python worker, not by
    Spark and shipped as Arrow: the JVM's scan, shuffle (600 MB at 10M ops) and row-to-Arrow
    conversion cost 37 JVM CPU-s of a 10M-line history whose every key is searched, this
    read 8-11 CPU-s per worker (half the keys, 14.5M rows each; a handful of keys of the
    bench's 10M store: 1.3). Reading whole tables with `pq.read_table` and taking each key's
    rows from them instead measured 14.5-15.4 CPU-s and twice the memory (docs/performance.md)."""
    by_run: dict[int, list[int]] = {}
    for k in ks:
        by_run.setdefault(run_id(k), []).append(key_in_run(k))
    parts = []
    for rid, keys in sorted(by_run.items()):
        where = (pc.field("run") == runs[rid]) & pc.field("key").isin(keys)
        for table, (_kind, columns) in CALL_COLUMNS.items():
            read = [name for name in columns.values() if name is not None]
            # the store's schema: a column an older table lacks reads as null
            parts.append(_as_calls(rid, table, ds.dataset(
                table_paths([run_dirs[rid]], table)[0], schema=SCHEMAS[table]).to_table(
                columns=["key", *read], filter=where)))
    return _by_key(parts)


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


def _key_search(searched: frozenset, deadline_epoch: float, rid: int, rows: dict) -> list[dict]:
    """The key pass's kernel: search one run's keys of the task that are in `searched`."""
    parts = []
    for table in CALL_COLUMNS:
        t = rows[table]
        keys = pc.add(t["key"], rid * KEY_SPAN)
        parts.append(_as_calls(rid, table, t.filter(pc.is_in(keys, pa.array(sorted(searched), pa.int64())))))
    table = _by_key(parts)
    return list(_search_groups(table, _searcher(deadline_epoch))) if table.num_rows else []


def key_work(job):
    """Every key searched in the engine's key pass, when the sample proves nearly every key
    concurrent (`checkers.spark.sequential.search_all`): the search then shares the log
    checker's read of the rows. Else None: the window settles keys first, then `_search`."""
    from checkers.spark.key_pass import KeyWork

    searched = search_all(job.tables)
    if searched is None:
        return None
    limit = time_limit_default() if job.time_limit is None else job.time_limit
    deadline = time.time() + limit * max(1, len(job.runs))
    return KeyWork(("sends", "reads", "ends"), functools.partial(_key_search, frozenset(searched), deadline))


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


def _search(tables: Tables, searched: set[int], search) -> list[dict]:
    """The keys `searched` -> [{k, found}]: the keys dealt round-robin to one Spark task per
    core, each reading its keys' rows itself (`_key_rows`) and searching them one by one."""
    run_dirs, runs = list(tables.run_dirs), list(tables.runs)
    keys = sorted(searched)
    tasks = max(1, min(len(keys), tables.spark.sparkContext.defaultParallelism))

    def search_keys(ks):
        return _search_groups(_key_rows(run_dirs, runs, list(ks)), search)

    return (tables.spark.sparkContext.parallelize([keys[i::tasks] for i in range(tasks)], tasks)
            .flatMap(search_keys).collect())


def settle(tables: Tables, order: list | None = None
           ) -> tuple[dict[str, tuple[int, int, int]], set[int]]:
    """Decide the keys in plain real-time order in the JVM: -> ({run: (keys, calls,
    configs) of the settled keys}, k of the keys left to search). order: the collected
    rows of `settled_rows`, else it collects them (one row per key: a campaign of
    100 runs of 1000 keys is 100,000 small rows)."""
    summary: dict[str, list[int]] = {}
    searched = set()
    for row in order if order is not None else settled_rows(tables):
        if not row["sequential"]:
            searched.add(row["k"])
            continue
        entry = summary.setdefault(tables.runs[run_id(row["k"])], [0, 0, 0])
        entry[0] += 1
        entry[1] += row["calls"]
        entry[2] += row["calls"] + 1 if row["calls"] > 0 else 0
    return {run: tuple(entry) for run, entry in summary.items()}, searched


SETTLED = True  # check() uses job.settled() (checkers.spark.engine)


def check(job) -> dict[str, dict]:
    """The linearizability checker's Spark driver (checkers.spark.engine)."""
    searched_in_pass = search_all(job.tables) is not None
    return check_runs(job.tables, job.time_limit, job.settled(),
                      job.keyed("linearizability") if searched_in_pass else None)


def check_runs(tables: Tables, time_limit: float | None = None,
               order: tuple[list, float] | None = None, passed: list | None = None) -> dict[str, dict]:
    """-> {run: linearizability result} for every run of `tables` (before tables.release()).
    order: the rows of `settled_rows` and the seconds they took, if the caller
    has them (they count in the result's time). passed: the key pass's answers
    ([(rid, [{k, found}])]) when it searched the keys, else they are searched here."""
    from checkers.spark.session import ship_package

    started = time.monotonic() - (order[1] if order else 0.0)
    summary, searched = settle(tables, order[0] if order else None)
    limit = time_limit_default() if time_limit is None else time_limit
    ship_package(tables.spark.sparkContext)
    # The limit is each run's, as in the local engine: a job of many runs (a campaign's final
    # check) has their sum. One shared 120 s for 20 runs of a loaded campaign left 16 of them
    # unknown (2026-11-28, false-alarms-kafka-membership at load 25) that each run's own check
    # had decided valid.
    search = _searcher(time.time() + limit * max(1, len(tables.runs)))
    if passed is not None:
        rows = [row for _rid, found in passed for row in found]
    else:
        rows = _search(tables, searched, search) if searched else []
    found = {row["k"]: json.loads(row["found"]) for row in rows}
    per_run: dict[str, list] = {run: [] for run in tables.runs}
    for k, verdict in found.items():
        per_run[tables.runs[run_id(k)]].append((key_in_run(k), verdict))
    seconds = time.monotonic() - started
    return {run: result(per_key, "spark", seconds, limit, summary.get(run, (0, 0, 0)))
            for run, per_key in per_run.items()}

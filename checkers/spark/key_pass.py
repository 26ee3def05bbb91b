"""One pass over the check's keys in Spark tasks: each task reads its keys' rows of every
run once, with pyarrow, and runs every Python kernel that asked for them.

Why one pass: the log checker's counts (`checkers.log_arrays`), the replica diff's
(`checkers.replica_arrays`) and the linearizability search read the same rows; on a
10M-line history a read of sends, reads and ends is ~7-10 CPU-s per half of the keys,
which separate passes paid again each. Every finding of those checkers is per key, so a
task that holds every row of its keys answers for them completely, and the answers of
disjoint sets of keys merge (each driver says how).

The keys of the tables the kernels read (of every run, `Tables.keys_in`) are dealt
round-robin to one task per core (`deal`); each task reads its keys' rows filtered from
whole tables (they are in time order, so every task decodes every row group: more tasks
than cores would decode them more often). A kernel is a `KeyWork`: the tables it reads and a function
(run id, {table: pyarrow Table of the task's rows}) -> a small picklable answer, run in
the Python worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import pyarrow.compute as pc
import pyarrow.dataset as ds

from history.flatten import END_COLUMNS, READ_COLUMNS, RECORD_COLUMNS, REPLICA_COLUMNS, SEND_COLUMNS
from history.parquet import SCHEMAS, table_paths

# Input rows per task below which a check runs in fewer tasks (a test's store: one).
ROWS_PER_TASK = 1_000_000
# Set (to anything) while a check runs: each task profiles its work with cProfile, and
# `last_profile` gets the top entries summed over the tasks (`harness bench` shows them:
# the driver's own profile only waits on the tasks).
PROFILE_ENV = "CHECKERS_PROFILE_TASKS"
PROFILE_TOP = 12
last_profile: list[dict] = []
COLUMNS = {"sends": SEND_COLUMNS, "reads": (*READ_COLUMNS, "seq"), "ends": END_COLUMNS,
           "records": RECORD_COLUMNS, "replicas": REPLICA_COLUMNS}


@dataclass(frozen=True)
class KeyWork:
    """A kernel of the pass: the tables it reads, and what it does with one run's rows."""

    tables: tuple[str, ...]
    kernel: Callable  # (rid, {table: pa.Table}) -> answer


def deal(keys: list[int], tasks: int) -> list[list[int]]:
    """Sorted keys dealt round-robin to `tasks` tasks: neighbouring keys, which a generator
    or a scenario often makes alike (the bench's invalid keys are 0 and 1), go to different
    cores, and no task gets a slow stretch of keys."""
    keys = sorted(keys)
    return [keys[i::tasks] for i in range(min(tasks, len(keys)))]


def read_keys(run_dir: str, run: str, keys: list[int], names) -> dict:
    """{table: the run's rows of these keys} (the store's schema; a reads table without seq,
    written before it existed, comes without that column)."""
    where = (pc.field("run") == run) & pc.field("key").isin(keys)
    out = {}
    for name in names:
        table = ds.dataset(table_paths([run_dir], name)[0], schema=SCHEMAS[name]).to_table(
            columns=list(COLUMNS[name]), filter=where)
        if name == "reads" and table.num_rows and table.column("seq").null_count == table.num_rows:
            table = table.drop_columns(["seq"])
        out[name] = table
    return out


def run_pass(tables, work: dict[str, KeyWork]) -> dict[str, list]:
    """name -> [(rid, answer)] of every run and task (disjoint sets of keys): one Spark job."""
    from checkers.spark.session import ship_package
    from checkers.spark.tables import key_in_run

    run_dirs, runs = list(tables.run_dirs), list(tables.runs)
    out: dict[str, list] = {name: [] for name in work}
    names = sorted({t for w in work.values() for t in w.tables})
    keys = {key_in_run(k) for k in tables.keys_in(names)}
    if not keys:
        return out
    context = tables.spark.sparkContext
    dealt = deal(list(keys), max(1, min(context.defaultParallelism, -(-tables.rows // ROWS_PER_TASK))))
    ship_package(context)
    profile = bool(os.environ.get(PROFILE_ENV))

    def work_on(ks):
        answers = []
        for rid, (run_dir, run) in enumerate(zip(run_dirs, runs)):
            rows = read_keys(run_dir, run, ks, names)
            answers += [(name, rid, w.kernel(rid, rows)) for name, w in work.items()]
        return answers

    def task(ks):
        return _profiled(work_on, ks) if profile else work_on(ks)

    entries = []
    for name, rid, answer in context.parallelize(dealt, len(dealt)).flatMap(task).collect():
        if name is None:
            entries += answer
        else:
            out[name].append((rid, answer))
    if profile:
        last_profile[:] = _summed(entries)
    return out


def _profiled(work, ks) -> list:
    """work(ks)'s answers, and (None, None, its cProfile entries) (in the Python worker)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    answers = profiler.runcall(work, ks)
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (calls, total, own, cumulative, callers)
    ranked = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:PROFILE_TOP * 3]
    entries = [(f"{'/'.join(path.split('/')[-2:])}:{line}({name})", calls, own, cumulative)
               for (path, line, name), (_, calls, own, cumulative, _) in ranked]
    return answers + [(None, None, entries)]


def _summed(entries: list) -> list[dict]:
    """The tasks' entries summed per function, the PROFILE_TOP largest by own time."""
    total: dict[str, list] = {}
    for function, calls, own, cumulative in entries:
        sums = total.setdefault(function, [0, 0.0, 0.0])
        sums[0] += calls
        sums[1] += own
        sums[2] += cumulative
    ranked = sorted(total.items(), key=lambda item: item[1][1], reverse=True)[:PROFILE_TOP]
    return [{"function": f, "calls": c, "own_s": round(o, 3), "cumulative_s": round(cu, 3)}
            for f, (c, o, cu) in ranked]

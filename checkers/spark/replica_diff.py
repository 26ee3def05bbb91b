"""The replica diff's Spark driver: the check's keys dealt to Spark tasks, each diffed by
the array kernel in a Python worker.

Every finding of the replica diff is per key (and so is `differences`), so the engine's
key pass (`checkers.spark.key_pass`) hands each task its keys' records, replicas, sends
and ends of every run (read once with pyarrow, shared with the log checker and the
linearizability search), and `checkers.replica_arrays` counts them by sorting packed
64-bit integers, its first examples and differences from the in-process kernel
(`checkers.replica_diff`) on the first keys that have them. The tasks' answers merge by
adding counts and sorting the lists by key (`checkers.replica_arrays.merge`): the results
are the kernel's (tests hold them identical).

Why not DataFrame jobs (this driver was, until 2026-11-30): they needed the triples T of
every input row and their per-offset, per-value and per-key facts, ~40 of a 10M-op
check's JVM CPU-s before any finding (docs/performance.md, issue 40).
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from checkers.spark.key_pass import KeyWork


def _key_findings(_rid: int, rows: dict) -> tuple[dict, bool]:
    """One run's rows of one task's keys -> (`checkers.replica_arrays.Findings`' fields,
    whether a key acknowledged to has no end row: the final reads did not complete)."""
    from checkers import replica_arrays

    found = replica_arrays.findings(rows["records"], rows["replicas"], rows["sends"]).__dict__
    return found, _unfinished(rows["sends"], rows["ends"])


def _unfinished(sends, ends) -> bool:
    """Whether some key with an acknowledged send has no end row
    (`checkers.replica_diff.final_reads_complete`, negated)."""
    acked = sends.filter(pc.and_(pc.equal(sends["type"], "ok"), pc.is_valid(sends["offset"])))
    keys = np.unique(acked["key"].to_numpy()) if acked.num_rows else np.zeros(0, np.int64)
    return bool(len(np.setdiff1d(keys, ends["key"].to_numpy())))


def key_work(_job) -> KeyWork:
    """The replica diff's part of the engine's key pass."""
    return KeyWork(("records", "replicas", "sends", "ends"), _key_findings)


def check(job) -> dict[str, dict]:
    """The replica diff's Spark driver (checkers.spark.engine): the key pass's answers merged."""
    from checkers import replica_arrays

    parts: dict[int, list] = {rid: [] for rid in range(len(job.runs))}
    unfinished = dict.fromkeys(range(len(job.runs)), False)
    for rid, (found, open_keys) in job.keyed("replica-diff"):
        parts[rid].append(replica_arrays.Findings(**found))
        unfinished[rid] = unfinished[rid] or open_keys
    return {run: replica_arrays.merge(parts[rid]).result(complete=job.complete.get(run, True),
                                                        final_reads=not unfinished[rid])
            for rid, run in enumerate(job.runs)}

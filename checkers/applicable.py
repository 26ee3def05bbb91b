"""Which registered checkers apply to a history: those its workload names
(`workloads.Workload.checkers`; a history holding transactions whose workload
does not name `txn`, like a Jepsen import, gets TRANSACTIONAL), and any checker no workload names (one
registered by a plugin or a test runs everywhere, as before).

Why here and not in each engine: both engines and both entry points (a store,
a lone history) ask the same question.
"""
from __future__ import annotations

import json
import mmap
import os

from harness import registry

TXN = "txn"              # the checker of transactions
# A history with transactions whose workload names no `txn` (a Jepsen import, or a workload
# that declares nothing): the txn checker, and the log checker on its flattened view.
TRANSACTIONAL = (TXN, "log")
DEFAULT_WORKLOAD = "log"  # a store or history that names none
TXN_MARKS = (b'"f":"txn"', b'"f": "txn"')  # how a JSONL line says it is a transaction


def names_for(workload: str | None, transactional: bool) -> list[str]:
    """The registered checkers (registry order) for a history of `workload`."""
    workloads = registry.load_all(registry.WORKLOADS)
    chosen = workloads.get(workload or DEFAULT_WORKLOAD) or workloads.get(DEFAULT_WORKLOAD)
    declared = set(getattr(chosen, "checkers", ()) or ())
    if transactional and TXN not in declared:
        declared = set(TRANSACTIONAL)
    claimed = {name for w in workloads.values() for name in getattr(w, "checkers", ())} | {TXN}
    return [name for name in registry.names(registry.CHECKERS)
            if name in declared or name not in claimed or (name == TXN and transactional)]


def for_store(store_dir: str, history: str) -> list[str]:
    """The checkers of a store: its test.json's workload, and whether its history has txn ops."""
    try:
        with open(os.path.join(store_dir, "test.json"), encoding="utf-8") as handle:
            workload = json.load(handle).get("workload")
    except (OSError, ValueError, AttributeError):
        workload = None
    return names_for(workload, jsonl_has_txn(history))


def for_ops(ops) -> list[str]:
    """The checkers of a lone history already read into ops (a Jepsen import)."""
    return names_for(None, any(op.get("f") == TXN for op in ops))


def jsonl_has_txn(path: str) -> bool:
    """Whether a history.jsonl holds a txn op: a byte search (a 10M-op file in about a second),
    not a parse."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return False
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return any(data.find(mark) >= 0 for mark in TXN_MARKS)
    except OSError:
        return False

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
DEFAULT_WORKLOAD = "log"  # a store or history that names none
TRANSACTIONAL_WORKLOAD = "queue"  # what a lone history with transactions is read as
TXN_MARKS = (b'"f":"txn"', b'"f": "txn"')  # how a JSONL line says it is a transaction


def workload_of(workload: str | None, transactional: bool):
    """The registered Workload a history is checked as (None if none is registered)."""
    workloads = registry.load_all(registry.WORKLOADS)
    if workload is None and transactional and TRANSACTIONAL_WORKLOAD in workloads:
        workload = TRANSACTIONAL_WORKLOAD
    return workloads.get(workload or DEFAULT_WORKLOAD) or workloads.get(DEFAULT_WORKLOAD)


def names_for(workload: str | None, transactional: bool) -> list[str]:
    """The registered checkers (registry order) for a history of `workload`."""
    workloads = registry.load_all(registry.WORKLOADS)
    chosen = workload_of(workload, transactional)
    declared = set(getattr(chosen, "checkers", ()) or ())
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
    if isinstance(workload, dict):   # older stores keep the workload's settings there, its name inside
        workload = workload.get("name")
    if not isinstance(workload, str):
        workload = None
    return names_for(workload, jsonl_has_txn(history))


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

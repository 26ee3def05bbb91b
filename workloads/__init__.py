"""Workloads: what the clients do (registered in `replog.workloads`).

A workload is one module with a `Workload` declaration; `make(spec, db,
history, log)` returns the object the runner drives: `setup()`,
`run(deadline)` (the random clients), `leader_node()` (for leader-targeted
faults), `write(key, count, acks, expect, step)` (scenario writes),
`final_reads(recovery_timeout)` and `close()`.

`checkers`: the registered checkers that apply to the workload's histories
(checkers.applicable); a history with transactions (`txn` ops) also gets `txn`,
whatever its workload.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    make: Callable[..., Any]  # (spec, db, history, log) -> the workload object
    checkers: tuple[str, ...] = ("log", "replica-diff", "linearizability")

"""Workloads: what the clients do (registered in `replog.workloads`).

A workload is one module with a `Workload` declaration; `make(spec, db,
history, log)` returns the object the runner drives: `setup()`,
`run(deadline)` (the random clients), `leader_node()` (for leader-targeted
faults), `under_replicated()` (optional: keys not fully in sync, for faults
that destroy a copy), `write(key, count, acks, expect, step)` (scenario writes),
`final_reads(recovery_timeout)` and `close()`.

`needs`: capabilities of harness.sut the workload asks of the system (a spec
that pairs it with a system lacking one is refused before any host exists);
`options`: the pydantic model of the spec's `workload_options` (None: it takes none);
`checkers`: the registered checkers run on its histories (checkers.applicable; a
history with transactions, `txn` ops, also gets `txn` whatever its workload);
`not_checked`: those of them its histories are not for, and why (kept in
results.json as not applicable).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    make: Callable[..., Any]  # (spec, db, history, log) -> the workload object
    checkers: tuple[str, ...] = ("log", "replica-diff", "linearizability")
    needs: frozenset[str] = field(default_factory=frozenset)
    options: Any = None       # a pydantic BaseModel subclass (extra fields forbidden), or None
    # checkers that do not apply to the workload's histories: name -> why (results.json keeps them as
    # not applicable, "unknown" with that reason, and they do not make the verdict unknown)
    not_checked: dict[str, str] = field(default_factory=dict)

    def parse_options(self, data: dict | None):
        """The validated options (ValueError, one line); {} when the workload takes none."""
        if self.options is None:
            if data:
                raise ValueError(f"workload {self.name!r} takes no options; leave out {', '.join(sorted(data))}")
            return None
        return self.options.model_validate(data or {})

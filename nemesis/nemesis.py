"""The one place where faults are applied: the random schedule's steps and
scenario steps both end here (harness.steps.FaultStep -> Nemesis.start /
stop), and every start and stop is written to the history as a nemesis op.

Faults are made on first use from the registry (`replog.faults`); a fault
the system does not support was refused when the spec or script was read.
"""
from __future__ import annotations

import asyncio
import random

from harness import registry
from harness.sut import PAUSE, PROCESS, capabilities_of
from nemesis.fault import FaultEnv, Target


class Nemesis:
    def __init__(self, env: FaultEnv, history, seed: int = 0, log=lambda m: None):
        self.env = env
        self.history = history
        self.rng = random.Random(seed)
        self.log = log
        self.faults: dict[str, tuple] = {}  # name -> (FaultKind, Fault)

    def fault(self, name: str) -> tuple:
        if name not in self.faults:
            kind = registry.fault(name)
            capabilities_of(self.env.db).require_fault(kind)
            self.faults[name] = (kind, kind.make(self.env))
        return self.faults[name]

    def _record(self, f: str, value, **extra) -> dict:
        op = self.history.nemesis(f, value, **extra)
        self.log(f"nemesis {f} {value}")
        return op

    async def start(self, name: str, target: Target):
        kind, fault = self.fault(name)
        value = await asyncio.to_thread(fault.start, target)
        why = getattr(target, "why", None)
        self._record(kind.start, value, **({"why": why} if why else {}))
        return value

    async def stop(self, name: str, target: Target | None = None) -> list:
        _kind, fault = self.fault(name)
        recorded = []
        await asyncio.to_thread(fault.stop, target, self.rng, lambda f, v: recorded.append(self._record(f, v)))
        return [op["value"] for op in recorded]

    async def final(self) -> dict:
        """Heal every fault at once, resume and restart every process; the
        history's `final` op carries what was restarted."""
        def heal():
            for _kind, fault in self.faults.values():
                fault.heal()
            db, restarted = self.env.db, []
            capabilities = capabilities_of(db)
            for n in [*self.env.plan.nodes, *self.env.plan.roles.values()]:
                if capabilities.has(PAUSE) and db.pausable is not None:
                    db.pausable.resume(n)
                if capabilities.has(PROCESS) and db.process is not None and not db.process.running(n):
                    db.process.start(n)
                    restarted.append(n)
            return {"healed": True, "restarted": restarted}

        value = await asyncio.to_thread(heal)
        self._record("final", value)
        return value

"""The seeded random fault schedule: wait (0.5-1.5 x interval), start a
random fault, hold it (0.5-1 x interval), stop it, repeat until the deadline. The seed fixes every choice (fault, targets,
partition kind, jitter); only the cluster's reactions vary between runs."""
from __future__ import annotations

import asyncio
import random
import time
from typing import Awaitable, Callable

from nemesis.faults import Fault


class Schedule:
    def __init__(self, faults: list[Fault], seed: int, interval: float, history,
                 leader: Callable[[], Awaitable[str | None]] | None = None, log=lambda m: None):
        self.faults = faults
        self.rng = random.Random(seed)
        self.interval = interval
        self.history = history
        self.leader = leader
        self.log = log
        self.active: Fault | None = None

    async def _leader(self) -> str | None:
        if self.leader is None:
            return None
        try:
            return await asyncio.wait_for(self.leader(), 2.0)
        except Exception:
            return None

    async def run(self, deadline: float) -> None:
        """Run faults until time.monotonic() >= deadline; stops the last one."""
        if not self.faults:
            return
        try:
            while True:
                await self._sleep_until(deadline, self.interval * self.rng.uniform(0.5, 1.5))
                if time.monotonic() >= deadline:
                    break
                fault = self.rng.choice(self.faults)
                leader = await self._leader()
                self.active = fault
                value = await asyncio.to_thread(fault.start, self.rng, leader)
                self.history.nemesis(fault.name, value)
                self.log(f"nemesis {fault.name} {value}")
                await self._sleep_until(deadline, self.interval * self.rng.uniform(0.5, 1.0))
                await self.stop_active()
        finally:
            if self.active is not None:
                await asyncio.shield(self.stop_active())

    async def stop_active(self) -> None:
        fault, self.active = self.active, None
        if fault is not None:
            await asyncio.to_thread(fault.stop, self.rng, self._record)

    def _record(self, f: str, value) -> None:
        self.history.nemesis(f, value)
        self.log(f"nemesis {f} {value}")

    @staticmethod
    async def _sleep_until(deadline: float, seconds: float) -> None:
        await asyncio.sleep(max(0.0, min(seconds, deadline - time.monotonic())))

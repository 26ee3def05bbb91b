"""The seeded random fault schedule, as a stream of steps for the runner:
wait (0.5-1.5 x interval), start a random fault on a target it chooses,
hold it (0.5-1 x interval), stop it; until the deadline. The seed fixes every
choice (fault, targets, partition kind, jitter); only the cluster's reactions
vary between runs. The steps run through the same Nemesis as scenario steps.
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import AsyncIterator, Awaitable, Callable

from harness.steps import FaultStep, RunContext, Sleep
from nemesis.fault import View


async def random_steps(ctx: RunContext, faults: list[str], seed: int, interval: float, deadline: float,
                       leader: Callable[[], Awaitable[str | None]] | None = None) -> AsyncIterator:
    if not faults:
        return
    rng = random.Random(seed)
    while True:
        yield Sleep(interval * rng.uniform(0.5, 1.5), deadline)
        if time.monotonic() >= deadline:
            return
        name = rng.choice(faults)
        fault = ctx.nemesis.fault(name)[1]
        target = fault.choose(rng, View(ctx.plan, await _leader(leader)))
        yield FaultStep(name, target=target, action=name)
        yield Sleep(interval * rng.uniform(0.5, 1.0), deadline)
        yield FaultStep(name, stop=True, action=f"stop {name}")


async def _leader(leader) -> str | None:
    if leader is None:
        return None
    try:
        return await asyncio.wait_for(leader(), 2.0)
    except Exception:
        return None

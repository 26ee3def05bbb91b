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
                       leader: Callable[[], Awaitable[str | None]] | None = None,
                       under_replicated: Callable[[], Awaitable[list[int] | None]] | None = None) -> AsyncIterator:
    """`under_replicated`: the keys whose ISR lacks one of their replicas now (None: not known);
    a fault that destroys a copy (`FaultKind.in_sync_first`) waits until there are none."""
    if not faults:
        return
    rng = random.Random(seed)
    while True:
        yield Sleep(interval * rng.uniform(0.5, 1.5), deadline)
        if time.monotonic() >= deadline:
            return
        name = rng.choice(faults)
        kind, fault = ctx.nemesis.fault(name)
        behind = None
        if kind.in_sync_first and under_replicated is not None:
            behind = await wait_in_sync(under_replicated, min(deadline, time.monotonic() + IN_SYNC_WAIT * interval),
                                        period=min(0.5, interval / 4))
        target = fault.choose(rng, View(ctx.plan, await _leader(leader)))
        hold = interval * rng.uniform(0.5, 1.0)
        if behind:   # the seed's draws are made all the same, so the schedule after a skip stays the seed's
            ctx.log(f"{name} skipped: keys {', '.join(map(str, behind))} still under-replicated after "
                    f"{IN_SYNC_WAIT * interval:g} s (the previous victim has not caught up)")
            continue
        yield FaultStep(name, target=target, action=name)
        yield Sleep(hold, deadline)
        yield FaultStep(name, stop=True, action=f"stop {name}")


# How long (in intervals) a fault that destroys a copy waits for every key to be fully in sync.
IN_SYNC_WAIT = 3


async def wait_in_sync(under_replicated, until: float, period: float = 0.5) -> list[int] | None:
    """Poll until no key is under-replicated or `until` passes -> the keys still behind
    ([] or None when in sync or not known). A metadata error counts as not known yet."""
    behind = None
    while True:
        try:
            behind = await asyncio.wait_for(under_replicated(), 2.0)
        except Exception:
            behind = None
        if behind == [] or time.monotonic() >= until:
            return behind
        await asyncio.sleep(period)


async def _leader(leader) -> str | None:
    if leader is None:
        return None
    try:
        return await asyncio.wait_for(leader(), 2.0)
    except Exception:
        return None

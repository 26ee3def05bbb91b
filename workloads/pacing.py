"""One schedule of invocation times shared by all of a workload's clients.

The configured rate is over all clients together. A client that sleeps a mean
gap of concurrency/rate after each op's completion invokes at 1/(gap + latency):
10 clients at 100 ops/s held 87-95 ops/s away from faults with sends at 10 ms
(docs/performance.md, issue 40), and far less with slower answers. Here each free client takes the next
time of one Poisson schedule at the configured rate, as Jepsen's `stagger` hands
its ops to free threads: latency no longer subtracts from the rate while a
client is free to take the next slot. A slot nobody was free to take is not
made up later (the schedule goes on from now, as Jepsen's does), so a stall
(every client waiting on a fault) is not followed by a burst.
"""
from __future__ import annotations

import asyncio
import random
import time


class Pacer:
    """Invocation slots at `rate` per second, exponentially spaced, taken in turn."""

    def __init__(self, rate: float, rng: random.Random, clock=time.monotonic) -> None:
        self.rate = rate
        self.rng = rng
        self.clock = clock
        self.next: float | None = None   # the next free slot (monotonic seconds)

    def take(self) -> float:
        """Seconds from now to the caller's slot; the slot after it is drawn."""
        now = self.clock()
        slot = now if self.next is None else max(self.next, now)
        self.next = slot + self.rng.expovariate(self.rate)
        return slot - now

    async def wait(self) -> None:
        await asyncio.sleep(self.take())

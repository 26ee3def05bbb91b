"""The clients' shared schedule (workloads/pacing.py), on a simulated clock: the configured
rate is held whatever the latency while a client is free, and a stall is not made up."""
from __future__ import annotations

import heapq
import random

import pytest

from workloads.pacing import Pacer

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(rate: float, clients: int, latency, until: float, seed: int = 1) -> list[float]:
    """Invocation times of `clients` clients that each take a slot when free, wait for it,
    then spend latency(t) on the op; -> the slots taken before `until`."""
    clock = Clock()
    pacer = Pacer(rate, random.Random(seed), clock)
    free = [(0.0, c) for c in range(clients)]
    invoked = []
    while free:
        t, c = heapq.heappop(free)
        clock.now = t
        slot = t + max(0.0, pacer.take())   # asyncio.sleep of a negative time returns at once
        if slot >= until:
            continue
        invoked.append(slot)
        heapq.heappush(free, (slot + latency(slot), c))
    return invoked


def test_the_rate_holds_with_latency_below_the_clients_capacity():
    # each client waiting a mean gap of 10/100 s after its op's completion gave 1/(0.1 + 0.05):
    # 67 ops/s; one schedule gives the configured 100
    invoked = simulate(100, 10, lambda t: 0.05, until=60)
    assert 95 <= len(invoked) / 60 <= 105


def test_slow_ops_cap_the_rate_at_what_the_clients_can_do():
    invoked = simulate(100, 10, lambda t: 0.5, until=60)
    assert 18 <= len(invoked) / 60 <= 20.5   # 10 clients / 0.5 s


def test_a_stall_is_not_followed_by_a_burst():
    # every op invoked between 10 s and 11 s takes 3 s (a fault): nothing is invoked while
    # all ten clients wait, and after it the missed slots are not made up
    invoked = simulate(100, 10, lambda t: 3.0 if 10 <= t < 11 else 0.01, until=30)
    after = [t for t in invoked if 14.5 <= t < 15.5]
    assert len(after) <= 130
    assert max(sum(1 for u in invoked if t <= u < t + 0.1) for t in invoked) <= 10 + 15
    assert 95 <= sum(1 for t in invoked if 20 <= t < 30) / 10 <= 105

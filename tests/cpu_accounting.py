"""Per-test CPU seconds, for cutting the suite's time (`HARNESS_TEST_CPU=<file.jsonl>`).

The suite runs as five streams at once on two cores and is CPU-bound, so a test's wall
time says more about its neighbours than about itself; its CPU does not. For each test
(setup, call and teardown together) this records the CPU of the pytest process, of the
children it reaped, and of its live descendants (a Spark JVM, brokers in namespaces),
read from /proc. Processes outside the tree (Docker's containers) are not counted.
Loaded by tests/conftest.py only when the variable is set; one JSON line per test.
"""
from __future__ import annotations

import json
import os
import time

import pytest

TICKS = os.sysconf("SC_CLK_TCK")


def _descendants_cpu(root: int) -> float:
    """CPU seconds of every live process under `root` (not root itself), children's
    reaped time included (cutime/cstime), so a process that lives on is counted once."""
    parent, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(b")") + 2:].split()
        pid = int(name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15]) / TICKS
    total = 0.0
    for pid in cpu:
        p, seen = parent.get(pid), 0
        while p and p != root and seen < 64:
            p, seen = parent.get(p), seen + 1
        if p == root:
            total += cpu[pid]
    return total


def _cpu_now() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _descendants_cpu(os.getpid())


class CpuAccounting:
    def __init__(self, path: str):
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cpu0, wall0 = _cpu_now(), time.monotonic()
        yield
        line = {"test": item.nodeid, "cpu_s": round(_cpu_now() - cpu0, 2),
                "wall_s": round(time.monotonic() - wall0, 2)}
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")

"""The clock fault on a real process with Debian's libfaketime: a bump and a
strobe move its wall clock (and only it), a reset puts it back; systems
that do not read time through libc are refused before any host exists."""
from __future__ import annotations

import json
import sys
import time

import pytest

from harness.remote.local import LocalRemote
from harness.sut import HostPlan, Unsupported
from nemesis.clock import CLOCK_FAULT, LIBS, parse_start, preflight
from nemesis.fault import FaultArgError, FaultEnv, Target

pytestmark = pytest.mark.root

PROBE = """
import json, os, time, asyncio
async def main():
    while True:
        print(json.dumps({"skew": time.time() - os.times().elapsed, "mono": time.monotonic() - os.times().elapsed}),
              flush=True)
        await asyncio.sleep(0.1)
asyncio.run(main())
"""


class Node:
    """The two DB calls the clock fault uses, for one process started here."""

    def __init__(self, tmp):
        self.tmp, self.env = tmp, {}

    def data_dir(self, node):
        return str(self.tmp / node / "data")

    def set_env(self, node, env):
        self.env[node] = env


def skews(log, since: int) -> list[float]:
    lines = log.read_text().splitlines()[since:]
    return [json.loads(line)["skew"] for line in lines if line.startswith("{")]


@pytest.mark.skipif(not any(__import__("os").path.exists(p) for p in LIBS), reason="scripts/setup.sh installs libfaketime")
def test_bump_and_strobe_move_only_the_wall_clock(tmp_path):
    remote = LocalRemote("n1", "127.0.0.1")
    db = Node(tmp_path)
    env = FaultEnv(db=db, remotes={"n1": remote}, plan=HostPlan(["n1"]), interval=2.0)
    CLOCK_FAULT.prepare(env)
    log = tmp_path / "probe.log"
    remote.start_daemon("probe", [sys.executable, "-c", PROBE], str(log), env=db.env["n1"])
    try:
        def settle(n=12):
            start = len(log.read_text().splitlines()) if log.exists() else 0
            deadline = time.monotonic() + 20
            while len(skews(log, start)) < n and time.monotonic() < deadline:
                time.sleep(0.1)
            return skews(log, start)

        base = settle()[-1]
        fault = CLOCK_FAULT.make(env)
        value = fault.start(Target(["n1"], detail={"bump_s": 3600}))
        assert value == {"nodes": ["n1"], "bump_s": 3600}
        after = settle(25)       # libfaketime re-reads the offset within a second
        assert abs(after[-1] - base - 3600) < 5
        rec = []
        fault.stop(None, None, lambda f, v: rec.append((f, v)))
        assert rec == [("clock-reset", ["n1"])]
        assert abs(settle(25)[-1] - base) < 5
        fault.start(Target(["n1"], detail={"strobe": {"delta_s": 1000, "period_s": 2, "duration_s": 6}}))
        seen = settle(70)
        assert any(abs(s - base - 1000) < 5 for s in seen) and any(abs(s - base) < 5 for s in seen)
        fault.heal()
        assert abs(settle(25)[-1] - base) < 5
        monos = [json.loads(line)["mono"] for line in log.read_text().splitlines() if line.startswith("{")]
        assert max(monos) - min(monos) < 5     # the monotonic clock never moved with the wall clock
    finally:
        remote.signal("probe", 9)


def test_systems_without_the_clock_capability_are_refused_in_one_line():
    from dataclasses import replace

    from systems.replica import SYSTEM
    no_clock = replace(SYSTEM, name="gosys", capabilities_for=lambda settings, options: {
        **SYSTEM.capabilities_for(settings, options), "clock": "it reads the clock without the C library"})
    with pytest.raises(Unsupported) as e:
        preflight("netns", no_clock.capabilities_in())
    assert "gosys" in str(e.value) and "clock" in str(e.value) and "\n" not in str(e.value)
    assert "without the C library" in str(e.value)   # the system's own reason
    preflight("netns", SYSTEM.capabilities_in())   # the replica reads its wall clock through libc


def test_bad_clock_steps():
    for arg, msg in (({"node": "A"}, "bump_s or strobe"), ({"node": "A", "bump_s": 1, "strobe": {"delta_s": 1}},
                                                           "bump_s or strobe"),
                     ({"node": "A", "strobe": {"delta_s": 5, "period_s": 0.1}}, "period_s")):
        with pytest.raises(FaultArgError) as e:
            parse_start(arg)
        assert msg in str(e.value)

"""Issue 26: `harness cleanup` run the instant after a run's harness was
SIGKILLed removes everything at once.

The bug: right after SIGKILL the harness's /proc entry still exists (its
threads are exiting, then it is a zombie until its parent reaps it), so
cleanup took the run for a live one and printed "0 resources removed".
These tests SIGKILL without reaping, which is exactly that window."""
from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cleanup import owner_state
from hnetns_util import leftovers, needs_root
from hrun_util import harness_cmd, harness_env, run_harness


@pytest.mark.unit
def test_zombie_and_dying_owner_are_not_alive():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        time.sleep(0.3)
        start = int(Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        assert owner_state(proc.pid, start) == "alive"
        assert owner_state(proc.pid, start + 1) == "gone"  # a reused pid is not our owner
        proc.send_signal(signal.SIGKILL)
        # From the instant of the kill on, never "alive" again.
        assert owner_state(proc.pid, start) in ("dying", "gone")
        deadline = time.monotonic() + 5
        while owner_state(proc.pid, start) != "gone" and time.monotonic() < deadline:
            time.sleep(0.01)
        # Still unreaped: its /proc entry is a zombie's, and that counts as gone.
        assert Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert owner_state(proc.pid, start) == "gone"
    finally:
        proc.kill()
        proc.wait()
    assert owner_state(proc.pid, start) == "gone"


def mounts_of(run_id: str) -> list[str]:
    return [l for l in Path("/proc/mounts").read_text().splitlines() if run_id in l]


@pytest.mark.root
@needs_root
@pytest.mark.timeout(400)
@pytest.mark.parametrize("seed", [3, 4])
def test_cleanup_at_once_after_sigkill(tmp_path, seed):
    """A replica run with kill, packet and power faults (processes, netem or
    shaper daemons, FUSE mounts), SIGKILLed at a seeded random moment and not
    reaped; `harness cleanup` at once leaves nothing of it."""
    proc = subprocess.Popen(harness_cmd("run", "--nemesis", "kill,packet,power", "--nemesis-interval", "2",
                                        "--time-limit", "60", "--seed", seed, "--subnet", f"10.245.{10 + seed}.0/24",
                                        "--store", tmp_path / "store", "--rate", "40"),
                            cwd=tmp_path, env=harness_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not any((tmp_path / "store").glob("*/*/history.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.2)
        time.sleep(random.Random(seed).uniform(2, 12))
        store = next((tmp_path / "store").glob("*/*/history.jsonl")).parent
        run_id = json.loads((store / "test.json").read_text())["run_id"]
        assert proc.poll() is None, "the run ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        assert leftovers(run_id), "the killed run must have left something for cleanup"
        out = run_harness(tmp_path, "cleanup")  # at once: the harness is not reaped yet
        assert out.returncode == 0, out
        assert "cleanup: 0 resources removed" not in out.stdout, out.stdout
        assert leftovers(run_id) == [], out.stdout
        assert mounts_of(run_id) == [], out.stdout
        assert not any((tmp_path / "runs").glob("*.json")), "the run record must be gone"
    finally:
        proc.kill()
        proc.wait()
        run_harness(tmp_path, "cleanup")  # a failed assertion must not leave the run on the machine

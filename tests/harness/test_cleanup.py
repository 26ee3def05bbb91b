"""`harness cleanup` removes what a SIGKILLed owner left behind: daemons in
the namespaces, namespaces, veths, the bridge, the host FORWARD rule and the
scratch directory, using only the run record."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from hnetns_util import leftovers, needs_root, new_run_id

pytestmark = [pytest.mark.root, needs_root, pytest.mark.timeout(120)]

OWNER = r"""
import sys, time
from harness.cleanup import RunRecord
from harness.cluster.netns import NetnsCluster
run_id, run_dir, work = sys.argv[1:4]
rec = RunRecord(run_id, run_dir=run_dir)
c = NetnsCluster(run_id, 2, "10.211.9.0/24", rec, work)
c.create()
for name in ("n1", "n2"):
    r = c.remotes[name]
    r.start_daemon("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], work + f"/{name}.log")
print("ready", flush=True)
time.sleep(600)
"""


def test_cleanup_after_sigkill(tmp_path):
    run_id = new_run_id()
    run_dir, work = tmp_path / "runs", tmp_path / "work"
    env = dict(os.environ, HARNESS_RUN_DIR=str(run_dir))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, run_id, str(run_dir), str(work)],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=os.getcwd())
    try:
        assert owner.stdout.readline().strip() == "ready"
        assert leftovers(run_id)
        assert work.is_dir()
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert leftovers(run_id), "SIGKILL must leave resources behind for this test to mean anything"
    record = json.loads((run_dir / f"{run_id}.json").read_text())
    assert {r["kind"] for r in record["resources"]} >= {"netns", "link", "host-iptables", "pid", "dir"}

    # The owner is dead, so a plain `harness cleanup` takes its record.
    out = subprocess.run([sys.executable, "-m", "harness", "cleanup"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "removed netns" in out.stdout
    time.sleep(0.2)
    assert leftovers(run_id) == []
    assert not work.exists()
    assert not (run_dir / f"{run_id}.json").exists()
    # Idempotent.
    again = subprocess.run([sys.executable, "-m", "harness", "cleanup"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "0 resources" in again.stdout

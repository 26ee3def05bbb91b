"""A harness killed with SIGKILL leaves containers and a network; the
labels let `cleanup_docker()` (called by `harness cleanup`) remove them,
while the clusters of live runs are left alone."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

from harness.cluster.docker import cleanup_docker

from dockertest_util import REPO, labelled
import pytest

pytestmark = pytest.mark.docker

CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from dockertest_util import new_cluster
    c = new_cluster(nodes=1)
    c.create()
    print(c.run_id, flush=True)
    time.sleep(600)
""")


def _orphaned_run() -> str:
    """A child harness brings up a one-node cluster and is killed with SIGKILL: its run id."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, "-c", CHILD, os.path.dirname(__file__)],
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        run_id = child.stdout.readline().strip()
        assert run_id, "the child harness did not bring its cluster up"
        assert len(labelled(run_id)) == 3  # ctl, n1, network
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert len(labelled(run_id)) == 3  # SIGKILL left them
    return run_id


def test_cleanup_after_sigkill_spares_live_runs(cluster):
    run_id = _orphaned_run()
    removed = cleanup_docker()
    expected = {f"container hx-{run_id}-ctl", f"container hx-{run_id}-n1", f"network hx-{run_id}"}
    # The suite's other streams run `harness cleanup` too (it removes every run whose owner is
    # gone, this child's included): what one of them removed first is not in this call's list,
    # and the two removals at once must not fail (Docker answers the second with 409).
    assert set(removed) <= expected, removed
    assert labelled(run_id) == []
    # The module's cluster belongs to this live process: untouched.
    assert len(labelled(cluster.run_id)) == 5
    assert cluster.remotes["n1"].run(["true"]).returncode == 0
    assert cleanup_docker() == []  # idempotent


def test_two_cleanups_at_once_remove_an_orphan_once_and_neither_fails(cluster):
    """Two `harness cleanup`s at the same moment (the suite's streams do this): Docker answers
    the second removal of a container with 409 ("removal ... already in progress") or 404;
    neither call fails, and between them every object is removed exactly once."""
    run_id = _orphaned_run()
    with ThreadPoolExecutor(2) as pool:
        calls = [pool.submit(cleanup_docker) for _ in range(2)]
        results = [call.result() for call in calls]
    ours = [r for removed in results for r in removed]
    assert sorted(ours) == sorted([f"container hx-{run_id}-ctl", f"container hx-{run_id}-n1",
                                   f"network hx-{run_id}"])
    assert labelled(run_id) == []
    assert len(labelled(cluster.run_id)) == 5

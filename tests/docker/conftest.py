"""Fixtures for the docker and ssh backends: a running engine and the node
image (built offline once, then cached), and clusters that are always torn
down."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.docker import DEFAULT_IMAGE, cleanup_docker, docker_client

from dockertest_util import RECORDS, REPO, new_cluster


def pytest_collection_modifyitems(items):
    """The first test here may install docker.io and debootstrap the base
    image (minutes on a busy 2-core machine): give this folder's tests room."""
    for item in items:
        if "tests/docker/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.timeout(900))


def _engine_pid() -> int | None:
    try:
        docker_client()
        return int(Path("/var/run/docker.pid").read_text())
    except (ClusterError, OSError, ValueError):
        return None


@pytest.fixture(scope="session")
def docker_ready():
    """Engine running and node image present (both scripts are idempotent).
    An engine that these tests started is stopped again at the end."""
    if os.geteuid() != 0:
        pytest.skip("the docker backend tests need root (to start dockerd)")
    was_running = _engine_pid() is not None
    for script in ("scripts/ensure-docker.sh", "docker/build-base.sh"):
        proc = subprocess.run(["bash", str(REPO / script)], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{script} failed:\n{proc.stderr[-2000:]}"
    yield DEFAULT_IMAGE
    shutil.rmtree(RECORDS, ignore_errors=True)
    pid = None if was_running else _engine_pid()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        for _ in range(200):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(docker_ready):
    """One running 3-broker cluster per test module, with replica/ installed."""
    c = new_cluster()
    try:
        c.create()
        c.install_code(str(REPO), ("replica",))
        yield c
    finally:
        c.destroy()
        assert cleanup_docker(run_id=c.run_id) == [], "destroy() left containers or networks"

"""Helpers for the docker/ssh backend tests (a unique module name: test
folders are not packages here)."""
from __future__ import annotations

import secrets
import tempfile
from pathlib import Path

from harness.cleanup import RunRecord
from harness.cluster.docker import LABEL_RUN, DockerCluster, docker_client

REPO = Path(__file__).resolve().parents[2]
# Run records of the test clusters (removed by the session fixture).
RECORDS = Path(tempfile.gettempdir()) / "hx-docker-test-records"


def new_cluster(nodes: int = 3, subnet: str | None = None, **kw) -> DockerCluster:
    run_id = "t" + secrets.token_hex(3)
    record = RunRecord(run_id, run_dir=RECORDS)
    return DockerCluster(run_id, nodes, record, subnet=subnet, **kw)


def labelled(run_id: str) -> list[str]:
    """Names of the containers and networks Docker still has for one run. A container
    removed between the list and its inspect (another stream's cleanup) is skipped."""
    client = docker_client()
    label = {"label": f"{LABEL_RUN}={run_id}"}
    return [c.name for c in client.containers.list(all=True, filters=label, ignore_removed=True)] + \
        [n.name for n in client.networks.list(filters=label)]

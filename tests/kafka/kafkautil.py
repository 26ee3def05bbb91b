"""A real Kafka cluster (KRaft: controller ctl + brokers n1..n3) on netns for
the adapter tests, set up by the adapter itself (systems/kafka/db.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from systems.kafka import SYSTEM
from tests.nats.natsutil import NatsCluster, healthy, log_ready, need_root, until  # noqa: F401  (re-exported)
from harness.sut import RunShape


# sessions and ISR lag short enough that a killed leader is replaced within seconds
QUICK_FAILOVER = {"broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 1000,
                  "replica.lag.time.max.ms": 5000}


class KafkaCluster(NatsCluster):
    """NatsCluster's namespaces, record and client thread, with the Kafka system."""

    def __init__(self, subnet: str, nodes: int = 3, keys: int = 2, tmp=None, settings: dict | None = None,
                 **options):
        super().__init__(subnet, nodes=nodes, keys=keys, tmp=tmp, **options)
        self.shape = RunShape(nodes=nodes, keys=keys, replication_factor=min(3, nodes),
                              settings={"min.insync.replicas": 2, **(settings or {})})

    def __enter__(self):
        self.cluster.create()
        options = SYSTEM.parse_options(self.options)
        self.db = SYSTEM.make_db(self.cluster, SYSTEM.host_plan(self.shape.nodes, options, self.shape.settings),
                                 self.shape, options)
        return self


def run_scenario(tmp_path: Path, name: str, variant: str, subnet: str, *extra: str) -> subprocess.CompletedProcess:
    """`harness scenario NAME --variant V --expect` as a user runs it (a subprocess, CI=true),
    its store, run records and work folders under tmp_path."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), CI="true",
               HARNESS_RUN_DIR=str(tmp_path / "runs"), HARNESS_WORK_ROOT=str(tmp_path / "work"))
    return subprocess.run([sys.executable, "-m", "harness", "scenario", name, "--variant", variant, "--expect",
                           *extra, "--store", str(tmp_path / "store"), "--subnet", subnet],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=280)

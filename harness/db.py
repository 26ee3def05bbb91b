"""The system under test on a cluster: start, stop and collect the replica
controller and brokers through Remote calls only (docs/interfaces.md,
"Replica processes"), so it works on every backend."""
from __future__ import annotations

import json
import os
import secrets
import signal
import time
from pathlib import Path

from harness.cluster.base import CONTROLLER, Cluster, broker_names
from systems.replica.db import put_cluster_secret

BROKER_PORT = 9092
CONTROLLER_PORT = 9093


class ReplicaDb:
    def __init__(self, cluster: Cluster, era: str, nodes: int, settings: dict):
        self.cluster = cluster
        self.era = era
        self.brokers = broker_names(nodes)
        self.settings = settings
        self.cluster_secret = secrets.token_hex(16)     # one per run: only this run's brokers are the cluster

    # -- addresses -------------------------------------------------------
    def broker_id(self, node: str) -> int:
        return int(node[1:])

    def node_of(self, broker_id: int) -> str:
        return f"n{broker_id}"

    def address(self, node: str) -> tuple[str, int]:
        port = CONTROLLER_PORT if node == CONTROLLER else BROKER_PORT
        return self.cluster.remotes[node].address, port

    def bootstrap(self) -> list[tuple[str, int]]:
        return [self.address(n) for n in self.brokers]

    def node_dir(self, node: str) -> str:
        return os.path.join(self.cluster.layout.work_dir, node)

    def log_path(self, node: str) -> str:
        return os.path.join(self.node_dir(node), "controller.log" if node == CONTROLLER else "broker.log")

    # -- lifecycle -------------------------------------------------------
    def _argv(self, node: str) -> list[str]:
        py = self.cluster.layout.python
        host, port = self.address(node)
        data = os.path.join(self.node_dir(node), "data")
        sets = [a for k, v in sorted(self.settings.items()) for a in ("--set", f"{k}={_fmt(v)}")]
        secret = ["--cluster-secret-file", os.path.join(self.node_dir(node), "cluster-secret")]
        if node == CONTROLLER:
            return [py, "-m", "replica.controller", "--listen", f"{host}:{port}", "--data-dir", data,
                    "--era", self.era, *secret, *sets]
        chost, cport = self.address(CONTROLLER)
        return [py, "-m", "replica.broker", "--id", str(self.broker_id(node)), "--listen", f"{host}:{port}",
                "--controller", f"{chost}:{cport}", "--data-dir", data, "--era", self.era, *secret, *sets]

    def start(self, node: str) -> int:
        remote = self.cluster.remotes[node]
        remote.run(["mkdir", "-p", os.path.join(self.node_dir(node), "data")])
        put_cluster_secret(remote, os.path.join(self.node_dir(node), "cluster-secret"), self.cluster_secret)
        env = {"PYTHONPATH": self.cluster.layout.code_dir, "PYTHONUNBUFFERED": "1"}
        return remote.start_daemon(node, self._argv(node), self.log_path(node), env=env)

    def start_all(self) -> None:
        self.start(CONTROLLER)
        for n in self.brokers:
            self.start(n)

    def running(self, node: str) -> bool:
        return self.cluster.remotes[node].daemon_running(node)

    def kill(self, node: str) -> None:
        self.cluster.remotes[node].signal(node, signal.SIGKILL)

    def pause(self, node: str) -> None:
        self.cluster.remotes[node].signal(node, signal.SIGSTOP)

    def resume(self, node: str) -> None:
        self.cluster.remotes[node].signal(node, signal.SIGCONT)

    def stop_all(self, grace: float = 5.0) -> None:
        """SIGTERM (after SIGCONT, in case one is paused), then SIGKILL."""
        nodes = self.brokers + [CONTROLLER]
        for n in nodes:
            r = self.cluster.remotes[n]
            r.signal(n, signal.SIGCONT)
            r.signal(n, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(self.running(n) for n in nodes):
            time.sleep(0.1)
        for n in nodes:
            if self.running(n):
                self.kill(n)

    def collect(self, store_dir: Path, dumps: dict[str, dict]) -> None:
        """Node logs, checkpoint files and replica dumps into store/nodes/<node>/."""
        for node in [CONTROLLER, *self.brokers]:
            dest = store_dir / "nodes" / node
            dest.mkdir(parents=True, exist_ok=True)
            remote = self.cluster.remotes[node]
            for name in ("broker.log", "controller.log"):
                src = os.path.join(self.node_dir(node), name)
                try:
                    remote.get(src, str(dest / name))
                except (OSError, Exception):  # absent on this host kind
                    pass
            if node != CONTROLLER:
                _collect_checkpoints(remote, os.path.join(self.node_dir(node), "data"), dest / "checkpoints")
            if node in dumps:
                (dest / "dump.json").write_text(json.dumps(dumps[node]))


def _collect_checkpoints(remote, data_dir: str, dest: Path) -> None:
    """Kafka-format checkpoint files: per log dir and per partition dir."""
    out = remote.run(["find", data_dir, "-name", "*checkpoint"], check=False)
    for path in out.stdout.split():
        rel = os.path.relpath(path, data_dir)
        try:
            remote.get(path, str(dest / rel))
        except Exception:
            pass


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)

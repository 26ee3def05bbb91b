"""The replica's controller and brokers on a cluster: install, start, signal
and collect through Remote calls only (docs/interfaces.md, "Replica
processes"), so it works on every backend. Implements harness.sut.DB,
Process and Pausable."""
from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

from harness.sut import HostPlan, RunShape
from systems.daemons import NodeDaemons, empty_dir
from systems.replica.client import ReplicaLogClient
from systems.replica.inspector import ReplicaInspector
from systems.replica.remote_tier import ReplicaRemoteTier

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
STORE_PORT = 9094
REPO_DIR = Path(__file__).resolve().parents[2]  # the folder that contains replica/


class ReplicaDb(NodeDaemons):
    def __init__(self, cluster, plan: HostPlan, shape: RunShape, options, system):
        self.system = system
        self.cluster = cluster
        self.options = options
        self.era = options.era
        self.controller = plan.roles["controller"]
        self.store = plan.roles.get("store")        # tiered storage's object store host, if any
        self.nodes = list(plan.nodes)
        self.hosts = [self.controller, *([self.store] if self.store else []), *self.nodes]
        self.settings = dict(shape.settings)
        self.cluster_secret = secrets.token_hex(16)     # one per run: only this run's brokers are the cluster
        self.env: dict[str, dict[str, str]] = {}
        self.process = self
        self.pausable = self
        self._membership = None
        self.inspector = ReplicaInspector(self)
        self.remote_tier = ReplicaRemoteTier(self, self.store) if self.store else None

    @property
    def membership(self):
        """MEMBERSHIP: the controller's partition reassignment."""
        if self._membership is None:
            from systems.replica.membership import ReplicaMembership
            self._membership = ReplicaMembership(self)
        return self._membership

    # -- addresses -------------------------------------------------------
    def broker_id(self, node: str) -> int:
        return int(node[1:])

    def address(self, node: str) -> tuple[str, int]:
        port = {self.controller: CONTROLLER_PORT, self.store: STORE_PORT}.get(node, BROKER_PORT)
        return self.cluster.remotes[node].address, port

    def endpoints(self) -> list[tuple[str, int]]:
        """Brokers, then the controller (topics are created through it)."""
        return [self.address(n) for n in self.nodes] + [self.address(self.controller)]

    def client(self, request_timeout: float = 5.0, prefer: str | None = None) -> ReplicaLogClient:
        """`prefer` only orders the bootstrap list: requests go to each partition's leader."""
        endpoints = self.endpoints()
        if prefer in self.nodes:
            first = self.address(prefer)
            endpoints = [first] + [e for e in endpoints if e != first]
        return ReplicaLogClient(endpoints, request_timeout)

    def node_dir(self, node: str) -> str:
        return os.path.join(self.cluster.layout.work_dir, node)

    def data_dir(self, node: str) -> str:
        return os.path.join(self.node_dir(node), "data")

    def data_files(self, node: str) -> list[str]:
        """Segments, indexes and checkpoints of every partition of the node."""
        d = self.data_dir(node)
        return [os.path.join(d, "*", "*.log"), os.path.join(d, "*", "*.index"), os.path.join(d, "*checkpoint"),
                os.path.join(d, "*", "*checkpoint")]

    def log_path(self, node: str) -> str:
        name = {self.controller: "controller.log", self.store: "store.log"}.get(node, "broker.log")
        return os.path.join(self.node_dir(node), name)

    def set_env(self, node: str, env: dict[str, str]) -> None:
        self.env[node] = dict(env)

    # -- lifecycle -------------------------------------------------------
    def secret_path(self, node: str) -> str:
        return os.path.join(self.node_dir(node), "cluster-secret")

    def _argv(self, node: str) -> list[str]:
        py = self.cluster.layout.python
        host, port = self.address(node)
        sets = [a for k, v in sorted(self.settings.items()) for a in ("--set", f"{k}={_fmt(v)}")]
        common = ["--era", self.era, "--cluster-secret-file", self.secret_path(node), *sets]
        if node == self.store:
            return [py, "-m", "replica.remote_store", "--listen", f"{host}:{port}", "--data-dir", self.data_dir(node)]
        if node == self.controller:
            return [py, "-m", "replica.controller_process", "--listen", f"{host}:{port}", "--data-dir",
                    self.data_dir(node), *common]
        if self.store:
            shost, sport = self.address(self.store)
            common += ["--remote-store", f"{shost}:{sport}"]
        chost, cport = self.address(self.controller)
        return [py, "-m", "replica.broker_process", "--id", str(self.broker_id(node)), "--listen", f"{host}:{port}",
                "--controller", f"{chost}:{cport}", "--data-dir", self.data_dir(node), *common]

    def setup(self) -> None:
        self.cluster.install_code(str(REPO_DIR), self.system.code)
        for n in self.hosts:
            self.start(n)

    def start(self, node: str) -> None:
        remote = self.cluster.remotes[node]
        remote.run(["mkdir", "-p", self.data_dir(node)])
        put_cluster_secret(remote, self.secret_path(node), self.cluster_secret)
        env = {"PYTHONPATH": self.cluster.layout.code_dir, "PYTHONUNBUFFERED": "1", **self.env.get(node, {})}
        remote.start_daemon(node, self._argv(node), self.log_path(node), env=env)

    def wipe(self, node: str) -> dict:
        """WIPE: the stopped broker's data directory emptied (a replaced disk); it starts
        again under the same broker id with no log, no checkpoints and no epoch cache."""
        return {"files_removed": empty_dir(self.cluster.remotes[node], self.data_dir(node))}

    def startup_problem(self) -> str | None:
        return self.exited_at_startup(self.hosts, "the replica")

    def teardown(self, grace: float = 5.0) -> None:
        self.stop_daemons(self.nodes + [self.controller] + ([self.store] if self.store else []), grace)

    def collect(self, node: str, dest: Path) -> None:
        """The node's log and its Kafka-format checkpoint files."""
        dest.mkdir(parents=True, exist_ok=True)
        remote = self.cluster.remotes[node]
        name = os.path.basename(self.log_path(node))
        try:
            remote.get(self.log_path(node), str(dest / name))
        except Exception:  # never started, or the host is gone
            pass
        if node in (self.controller, self.store):
            return
        data = self.data_dir(node)
        out = remote.run(["find", data, "-name", "*checkpoint"], check=False)
        for path in out.stdout.split():
            try:
                remote.get(path, str(dest / "checkpoints" / os.path.relpath(path, data)))
            except Exception:
                pass


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def put_cluster_secret(remote, path: str, secret: str) -> None:
    """Write the run's cluster secret to ``path`` on a host (mode 0600), for
    ``--cluster-secret-file`` (docs/interfaces.md): a file keeps it out of the
    process table and of the logged command lines."""
    fd, local = tempfile.mkstemp(prefix="cluster-secret-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
        remote.put(local, path)
        remote.run(["chmod", "600", path], check=False)
    finally:
        os.unlink(local)


"""nats-server on a cluster's hosts, through Remote calls only, so it works
on every backend. Implements harness.sut.DB, Process and Pausable.

Per node, under <work_dir>/<node>/: `nats.conf` (systems/nats/config.py),
`nats.log` (the server's stderr), and `data/` (the JetStream store and
nothing else, so a faults layer may mount there before setup).

The binary: with option `version: debian` (default) the host's own
`nats-server` (Debian's package; the docker node image has it). A host
without one gets this machine's binary uploaded (the Debian build links only
glibc, so it runs on any glibc x86-64 host); when this machine has none
either, setup stops with one line naming the host and the fix. With
`version: X.Y.Z`, the release built here by scripts/nats-server.sh (go
install, cached under build/nats/X.Y.Z/; a static Go binary) is used on
netns hosts and uploaded to the others, so every backend runs that version.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.cluster.base import ClusterError
from harness.sut import HostPlan, RunShape
from systems.daemons import NodeDaemons
from systems.nats.client import NatsLogClient
from systems.nats.dump import collect_dump
from systems.nats.config import CLIENT_PORT, NodeAddress, render
from systems.nats.inspector import NatsInspector

CONF = "nats.conf"
LOG = "nats.log"
INSTALL_HINT = "install it: apt-get install nats-server (scripts/setup.sh does)"
REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "nats-server.sh"


def release_binary(version: str) -> str:
    """This machine's nats-server of release `version` (X.Y.Z), installed on first use
    (scripts/nats-server.sh: go install into build/nats/<version>/); NatsMissing if it cannot be."""
    cached = REPO / "build" / "nats" / version / "bin" / "nats-server"
    if cached.is_file() and os.access(cached, os.X_OK):
        return str(cached)
    try:
        out = subprocess.run(["bash", str(INSTALL_SCRIPT), version], capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NatsMissing(f"nats-server {version}: scripts/nats-server.sh failed ({e})") from None
    if out.returncode != 0 or not cached.is_file():
        why = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise NatsMissing(f"nats-server {version} could not be installed with go install ({why}); "
                          f"check the version (go list -m -versions github.com/nats-io/nats-server/v2)")
    return str(cached)


class NatsMissing(ClusterError):
    """No nats-server on a host, and none here to upload."""


class NatsDb(NodeDaemons):
    def __init__(self, cluster, plan: HostPlan, shape: RunShape, options, system):
        self.system = system
        self.cluster = cluster
        self.options = options
        self.nodes = list(plan.nodes)
        self.hosts = list(plan.nodes)
        self.settings = dict(shape.settings)
        self.keys = shape.keys
        self.env: dict[str, dict[str, str]] = {}
        self.binary: dict[str, str] = {}
        self.process = self
        self.pausable = self
        self.inspector = NatsInspector(self)
        self.remote_tier = None      # JetStream has no tiered storage

    # -- where things are ------------------------------------------------
    def address(self, node: str) -> tuple[str, int]:
        return self.cluster.remotes[node].address, CLIENT_PORT

    def endpoints(self) -> list[tuple[str, int]]:
        return [self.address(n) for n in self.nodes]

    def servers(self) -> list[str]:
        return [f"nats://{h}:{p}" for h, p in self.endpoints()]

    def client(self, request_timeout: float = 5.0, prefer: str | None = None) -> NatsLogClient:
        """`prefer`: connect to that node's server first (others only when it fails),
        so a scenario can have its writer's publishes go through a chosen server."""
        servers = self.servers()
        if prefer in self.nodes:
            first = "nats://%s:%d" % self.address(prefer)
            servers = [first] + [s for s in servers if s != first]
        return NatsLogClient(servers, request_timeout, storage=self.options.storage,
                             in_order=prefer in self.nodes)

    def node_dir(self, node: str) -> str:
        return os.path.join(self.cluster.layout.work_dir, node)

    def data_dir(self, node: str) -> str:
        return os.path.join(self.node_dir(node), "data")

    def data_files(self, node: str) -> list[str]:
        """JetStream's files: per stream the message blocks (*.blk), their
        indexes (*.idx) and the stream metadata (meta.inf, meta.sum); per Raft
        group (the meta group `_meta_` and one per stream) the log blocks,
        indexes, peer/term state (peers.idx, tav.idx) and snapshots."""
        js = os.path.join(self.data_dir(node), "jetstream")
        streams = os.path.join(js, "*", "streams", "*")
        raft = os.path.join(js, "$SYS", "_js_", "*")
        return [os.path.join(streams, "msgs", "*.blk"), os.path.join(streams, "msgs", "*.idx"),
                os.path.join(streams, "meta.*"), os.path.join(streams, "obs", "*", "*"),
                os.path.join(raft, "msgs", "*.blk"), os.path.join(raft, "msgs", "*.idx"),
                os.path.join(raft, "*.idx"), os.path.join(raft, "meta.*"),
                os.path.join(raft, "snapshots", "*")]

    def conf_path(self, node: str) -> str:
        return os.path.join(self.node_dir(node), CONF)

    def log_path(self, node: str) -> str:
        return os.path.join(self.node_dir(node), LOG)

    def set_env(self, node: str, env: dict[str, str]) -> None:
        self.env[node] = dict(env)

    # -- install -----------------------------------------------------------
    def local_binary(self) -> str | None:
        """This machine's nats-server of the run's version (dumps and uploads use it)."""
        if self.options.version != "debian":
            return release_binary(self.options.version)
        name = self.options.server_binary
        return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")

    def _find_binary(self, node: str) -> str:
        """The host's nats-server, or this machine's uploaded to the host."""
        remote = self.cluster.remotes[node]
        if self.options.version != "debian":
            local = release_binary(self.options.version)
            if not _separate_filesystem(remote):
                return local
            dest = os.path.join(self.cluster.layout.work_dir, "bin", f"nats-server-{self.options.version}")
            remote.run(["mkdir", "-p", os.path.dirname(dest)])
            remote.put(local, dest)
            remote.run(["chmod", "755", dest])
            return dest
        name = self.options.server_binary
        probe = remote.run(["sh", "-c", f"command -v {name} || command -v /usr/sbin/{os.path.basename(name)}"],
                           check=False)
        found = probe.stdout.strip().splitlines()
        if probe.returncode == 0 and found:
            return found[0]
        local = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")
        if not _separate_filesystem(remote):
            raise NatsMissing(f"host {node} (a network namespace on this machine) has no {name}; "
                              f"{INSTALL_HINT}")
        if local is None:
            raise NatsMissing(f"host {node} ({remote.address}) has no {name} and this machine has none to "
                              f"upload; {INSTALL_HINT} on {node} or here")
        dest = os.path.join(self.cluster.layout.work_dir, "bin", "nats-server")
        remote.run(["mkdir", "-p", os.path.dirname(dest)])
        remote.put(local, dest)
        remote.run(["chmod", "755", dest])
        return dest

    def install(self) -> None:
        """Find (or upload) the binary on every host and write the configs."""
        peers = [NodeAddress(n, self.cluster.remotes[n].address) for n in self.nodes]
        with tempfile.TemporaryDirectory() as tmp:
            for node, me in zip(self.nodes, peers):
                self.binary[node] = self._find_binary(node)
                remote = self.cluster.remotes[node]
                remote.run(["mkdir", "-p", self.data_dir(node)])
                local = os.path.join(tmp, f"{node}.conf")
                Path(local).write_text(render(me, peers, self.data_dir(node), self.settings,
                                             sync_interval=self.options.sync_interval))
                remote.put(local, self.conf_path(node))

    def setup(self) -> None:
        self.install()
        for n in self.nodes:
            self.start(n)

    # -- processes -----------------------------------------------------------
    def start(self, node: str) -> None:
        remote = self.cluster.remotes[node]
        argv = [self.binary[node], "-c", self.conf_path(node)]
        remote.start_daemon(node, argv, self.log_path(node), env=self.env.get(node) or None)

    def startup_problem(self) -> str | None:
        return self.exited_at_startup([n for n in self.nodes if n in self.binary], "nats-server")

    def teardown(self, grace: float = 10.0) -> None:
        self.stop_daemons(self.nodes, grace)

    def collect(self, node: str, dest: Path) -> None:
        """The server's log and configuration, and (the server being stopped)
        the dump of its replica of every stream (systems/nats/dump.py)."""
        dest.mkdir(parents=True, exist_ok=True)
        remote = self.cluster.remotes[node]
        for path in (self.log_path(node), self.conf_path(node)):
            try:
                remote.get(path, str(dest / os.path.basename(path)))
            except Exception:  # never started, or the host is gone
                pass
        if node in self.binary:  # the host's own, or the one uploaded to it
            (dest / "nats-server.path").write_text(self.binary[node] + "\n")
        if node in self.binary and not self.running(node) and self.options.storage == "file":
            try:
                local = self.local_binary()  # the run's version reads its own store format
            except NatsMissing:
                local = None
            dump = collect_dump(remote, self.data_dir(node), dest, node, local, self.keys) if local else None
            if dump is not None:
                (dest / "dump.json").write_text(json.dumps(dump, separators=(",", ":")))


def _separate_filesystem(remote) -> bool:
    """True for hosts reached over SSH (docker, ssh): a binary can be uploaded;
    netns hosts share this machine's file system."""
    return getattr(remote, "netns", None) is None and type(remote).__name__ != "LocalRemote"


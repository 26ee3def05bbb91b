"""The seams between the runner and the places where replicas run.

A *cluster backend* (netns, docker, ssh) creates hosts and hands out one
`Remote` per host. Everything the harness does on a host -- install the replica
code, start and signal daemons, install iptables rules, fetch logs -- goes
through `Remote`, so every fault works on every backend.

Each backend module `harness/cluster/<backend>.py` (registered in
`replog.backends`) exposes
    make_cluster(spec: harness.spec.TestSpec, run_id: str,
                 record: harness.cleanup.RunRecord, work_dir: str,
                 roles: tuple[str, ...] = DEFAULT_ROLES) -> Cluster
whose hosts are the system's role hosts (`roles`: the replica's `ctl`, none
for NATS) and the data nodes n1..n<spec.nodes>
(spec.nodes, spec.subnet, spec.backend_options; `record.add(kind, ...)`
before creating anything; `work_dir` is the per-run scratch folder on the
hosts for data dirs and logs, which becomes `layout.work_dir`).

This module is a stable seam (docs/interfaces.md, "Cluster backends"): change
it only together with every backend.
"""
from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from harness.remote import ClusterError  # noqa: F401 - the backends' error, re-exported

DEFAULT_ROLES = ("ctl",)  # role hosts when a caller names none (the replica's controller)


def data_node_names(n: int) -> list[str]:
    """Host names of the data nodes: n1..nN."""
    return [f"n{i}" for i in range(1, n + 1)]


NEMESIS_CHAIN = "REPLOG-NEMESIS"  # the iptables chain faults add their rules to (removed with the hosts)


@runtime_checkable
class Remote(Protocol):
    """Control of one host. Paths are paths on that host."""

    name: str  # "n1", "ctl"
    address: str  # IP that other hosts (and the clients) use to reach it

    def run(self, argv: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a command to completion; output captured as text.

        With check=True a non-zero exit raises subprocess.CalledProcessError."""
        ...

    def start_daemon(self, name: str, argv: list[str], log_path: str, env: dict | None = None) -> int:
        """Start a long-running process in the background, stdout+stderr
        appended to log_path (on the host); returns its pid. `name` is the
        handle for signal()/daemon_running(); starting a name again replaces
        the record of the old process (which must not be running)."""
        ...

    def signal(self, name: str, sig: int) -> None:
        """Send a signal to a daemon started by start_daemon (no-op if it is gone)."""
        ...

    def daemon_running(self, name: str) -> bool:
        """True while the daemon has not exited (a SIGSTOPped one is running)."""
        ...

    def put(self, local_path: str, remote_path: str) -> None:
        """Copy a file or directory from the harness machine to the host."""
        ...

    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a file or directory from the host to the harness machine."""
        ...


@dataclass
class HostLayout:
    """Where things live on a host."""

    python: str = "python3"  # interpreter that runs replica/ (stdlib only)
    code_dir: str = "/opt/replog"  # folder that contains replica/ (PYTHONPATH)
    work_dir: str = "/var/lib/replog"  # data dirs and logs: <work_dir>/<node>/...


@runtime_checkable
class Cluster(Protocol):
    """A set of hosts for one run: the system's role hosts and n1..nN.

    Lifecycle: create() -> use remotes -> destroy(). destroy() is idempotent
    and must also work after a partial create(). Backends record what they
    create (see harness.cleanup) before creating it, so that `harness cleanup`
    can remove what a crashed run left behind.
    """

    run_id: str
    remotes: dict[str, Remote]  # by host name, filled by create()
    layout: HostLayout

    def create(self) -> None:
        """Create the hosts and the network between them."""
        ...

    def install_code(self, repo_dir: str, folders: tuple[str, ...]) -> None:
        """Make the folders (packages) under repo_dir that the system declares
        (System.code) importable on every host under layout.code_dir."""
        ...

    def enter_client_network(self) -> None:
        """Called at the start of the thread that runs the workload clients, so
        that sockets opened by that thread reach the hosts (netns: joins the
        client namespace; other backends: nothing to do)."""
        ...

    def destroy(self) -> None:
        """Stop every daemon and remove every host and network. Idempotent."""
        ...


def address_plan(subnet: str, nodes: int, example: str,
                 roles: tuple[str, ...] | list[str] = DEFAULT_ROLES) -> tuple[str, dict[str, str]]:
    """The host addresses every backend uses in its subnet: (first address,
    {role host j: second + j, n<i>: tenth + i}). The first address is the
    harness side (the client namespace on netns, the bridge gateway on docker).
    A bad or too small subnet is a ClusterError that suggests `example`."""
    if len(roles) > 8:
        raise ClusterError(f"{len(roles)} role hosts: at most 8 fit before n1's address")
    try:
        net = ipaddress.ip_network(subnet, strict=False)
    except ValueError as e:
        raise ClusterError(f"--subnet {subnet!r} is not a network ({e}); use e.g. {example}") from None
    if net.version != 4 or net.num_addresses < 16 + nodes:
        raise ClusterError(f"--subnet {subnet} is too small; use an IPv4 /27 or larger, e.g. {example}")
    base = net.network_address
    out = {role: str(base + 2 + j) for j, role in enumerate(roles)}
    for i, name in enumerate(data_node_names(nodes), start=1):
        out[name] = str(base + 10 + i)
    return str(base + 1), out

"""Cluster backend `netns`: one Linux network namespace per host on a private
bridge. The default backend: needs root and iproute2/iptables, nothing else.

Hosts: `ctl`, `n1..nN`, plus a hidden client namespace `cl` whose address no
grudge ever names, so the workload plays Jepsen's control node. The bridge has
no address in the host's namespace, so two runs may even use the same subnet.
Names carry the run id: namespaces `hx-<rid>-<host>`, bridge `hxb<rid>`, host
veth ends `hx<rid><host>` (at most 15 characters for rid of 6).
"""
from __future__ import annotations

import ctypes
import ipaddress
import os
import signal
import subprocess
from pathlib import Path

from harness.cleanup import RunRecord, release
from harness.cluster.base import DEFAULT_ROLES, ClusterError, HostLayout, address_plan
from harness.remote.local import LocalRemote

CLIENT_HOST = "cl"
CLONE_NEWNET = 0x40000000


def require_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError("the netns backend needs root (network namespaces, veths, iptables): "
                           "run as root, e.g. with sudo")


def host_addresses(subnet: str, nodes: int, roles=DEFAULT_ROLES) -> dict[str, str]:
    """cl = first host address, role hosts from the second, n<i> = tenth + i (base.address_plan)."""
    client, hosts = address_plan(subnet, nodes, "10.210.0.0/24", roles)
    return {CLIENT_HOST: client, **hosts}


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


class NetnsCluster:
    """Hosts as network namespaces on one bridge; the replica code runs from
    the repository checkout (no copy) with this interpreter."""

    def __init__(self, run_id: str, nodes: int, subnet: str, record: RunRecord,
                 work_dir: str, python: str | None = None, roles=DEFAULT_ROLES):
        require_root()
        self.run_id = run_id
        self.nodes = nodes
        self.subnet = subnet
        self.record = record
        self.addresses = host_addresses(subnet, nodes, roles)
        self.prefix_len = ipaddress.ip_network(subnet, strict=False).prefixlen
        self.bridge = f"hxb{run_id}"
        self.layout = HostLayout(python=python or _default_python(), code_dir="", work_dir=work_dir)
        self.remotes: dict[str, LocalRemote] = {}
        self.client_ns = self.ns_name(CLIENT_HOST)
        self._forward_rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]

    def ns_name(self, host: str) -> str:
        return f"hx-{self.run_id}-{host}"

    def _veth(self, host: str) -> str:
        return f"hx{self.run_id}{host}"

    def create(self) -> None:
        rec = self.record
        rec.add("dir", path=self.layout.work_dir)
        os.makedirs(self.layout.work_dir, exist_ok=True)
        rec.add("link", name=self.bridge)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        # Bridged frames traverse the host's FORWARD chain when
        # br_netfilter is loaded (e.g. by Docker, which may set policy DROP).
        rec.add("host-iptables", rule=self._forward_rule)
        subprocess.run(["iptables", "-I", *self._forward_rule], capture_output=True)
        for host, addr in self.addresses.items():
            ns, veth = self.ns_name(host), self._veth(host)
            rec.add("netns", name=ns)
            _ip("netns", "add", ns)
            rec.add("link", name=veth)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{addr}/{self.prefix_len}", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            if host != CLIENT_HOST:
                self.remotes[host] = LocalRemote(host, addr, netns=ns, on_start=self._record_pid)

    def _record_pid(self, pid: int, netns: str | None) -> None:
        self.record.add_pid(pid, netns)

    def install_code(self, repo_dir: str, folders: tuple[str, ...]) -> None:
        # Same file system: run straight from the checkout.
        self.layout.code_dir = str(Path(repo_dir).resolve())

    def client_remote(self) -> LocalRemote:
        """The client host (for tests: e.g. to run a probe from outside every grudge)."""
        return LocalRemote(CLIENT_HOST, self.addresses[CLIENT_HOST], netns=self.client_ns)

    def enter_client_network(self) -> None:
        """Move the calling thread (only it) into the client namespace."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{self.client_ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise ClusterError(f"setns({self.client_ns}): {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)

    def destroy(self) -> None:
        for remote in self.remotes.values():
            for name in list(remote._daemons):
                remote.signal(name, signal.SIGKILL)
        release(self.record)


def _default_python() -> str:
    import sys
    return sys.executable or "python3"


def make_cluster(spec, run_id: str, record: RunRecord, work_dir: str, roles=DEFAULT_ROLES) -> NetnsCluster:
    """The backend entry point (replog.backends): hosts n1..N plus the system's role hosts."""
    return NetnsCluster(run_id, spec.nodes, spec.subnet, record, work_dir, roles=tuple(roles))

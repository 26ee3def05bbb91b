"""Cluster backend `ssh`: hosts that already exist, reached over SSH only.

    --hosts ctl-host,broker1,broker2,...   (or name=host[:port] entries)
    --ssh-user root --ssh-key ~/.ssh/id_ed25519 --known-hosts ~/.ssh/known_hosts

The first host runs the controller (`ctl`), the others the brokers n1..nN.
Host keys must already be in the known_hosts file (RejectPolicy: no trust on
first use). Faults need root on the hosts (iptables, signals).

This is the docker backend's code path without the container lifecycle:
`SshHosts` (install code, daemons, files) is shared by both. Every file of a
run lives under /tmp/harness-<run id>/ on each host and is removed, and every
daemon killed, by destroy() -- or by `release_ssh()` after a crash, from what
the run record lists.
"""
from __future__ import annotations

import os
import posixpath
import shlex
import socket
from concurrent.futures import ThreadPoolExecutor

import paramiko

from harness.cleanup import RunRecord
from harness.cluster.base import DEFAULT_ROLES, NEMESIS_CHAIN, ClusterError, HostLayout, data_node_names
from harness.remote.ssh import SshRemote


class SshHosts:
    """What the docker and ssh backends share once the hosts exist."""

    run_id: str
    remotes: dict[str, SshRemote]
    layout: HostLayout

    def install_code(self, repo_dir: str, folders: tuple[str, ...]) -> None:
        """SFTP each <repo_dir>/<folder> (the system's System.code) to layout.code_dir/<folder> on every host."""
        for folder in folders:
            src = os.path.join(repo_dir, folder)
            dst = posixpath.join(self.layout.code_dir, folder)
            self._each(lambda r, src=src, dst=dst: r.put(src, dst))

    def enter_client_network(self) -> None:
        """Nothing to do: the harness machine reaches the hosts directly."""

    def _each(self, fn) -> list:
        """Apply fn to every remote in parallel; the first error is raised."""
        if not self.remotes:
            return []
        with ThreadPoolExecutor(max_workers=len(self.remotes)) as pool:
            return list(pool.map(fn, self.remotes.values()))


def load_private_key(path: str) -> paramiko.PKey:
    """The --ssh-key file as a paramiko key, or a one-line ClusterError."""
    path = os.path.expanduser(path)
    try:
        return paramiko.PKey.from_path(path)
    except FileNotFoundError:
        raise ClusterError(f"--ssh-key {path}: no such file; pass the private key that the "
                           "hosts accept (e.g. ~/.ssh/id_ed25519)") from None
    except paramiko.PasswordRequiredException:
        raise ClusterError(f"--ssh-key {path} is passphrase-protected; use a key without a "
                           "passphrase for the harness") from None
    except (paramiko.SSHException, ValueError, OSError) as e:
        raise ClusterError(f"--ssh-key {path}: not a usable private key ({e}); pass an "
                           "OpenSSH or PEM private key") from None


def load_known_hosts(path: str) -> paramiko.HostKeys:
    path = os.path.expanduser(path)
    try:
        return paramiko.HostKeys(path)
    except FileNotFoundError:
        raise ClusterError(f"--known-hosts {path}: no such file; create it with the hosts' "
                           "verified keys (e.g. ssh-keyscan HOST >> FILE, then check the "
                           "fingerprints)") from None
    except (OSError, paramiko.SSHException) as e:
        raise ClusterError(f"--known-hosts {path}: unreadable ({e}); pass an OpenSSH "
                           "known_hosts file") from None


def parse_nodes(nodes: str | list[str], roles=DEFAULT_ROLES) -> dict[str, tuple[str, int]]:
    """`--nodes` -> {name: (host, port)}. Plain entries: the role hosts first
    (the replica's ctl), then n1..nN; `name=host[:port]` entries name the host explicitly."""
    roles = list(roles)
    items = [x.strip() for x in (nodes.split(",") if isinstance(nodes, str) else nodes) if x.strip()]
    if len(items) < len(roles) + 1:
        first = f"{', '.join(roles)} first, then " if roles else ""
        raise ClusterError(f"--nodes {','.join(items) or '(empty)'}: need at least {len(roles) + 1} hosts, "
                           f"{first}the data nodes (e.g. --nodes h0,h1,h2,h3)")
    named = [x for x in items if "=" in x]
    if named and len(named) != len(items):
        raise ClusterError("--nodes: name all hosts (ctl=h0,n1=h1,...) or none")
    if named:
        pairs = [tuple(x.split("=", 1)) for x in items]
        expected = {*roles, *data_node_names(len(items) - len(roles))}
        if {n for n, _ in pairs} != expected:
            raise ClusterError(f"--nodes: names must be {', '.join(sorted(expected))}")
    else:
        pairs = list(zip([*roles, *data_node_names(len(items) - len(roles))], items))
    out = {}
    for name, spec in pairs:
        host, port = spec, 22
        if spec.count(":") == 1:
            host, p = spec.split(":")
            if not p.isdigit():
                raise ClusterError(f"--nodes: bad port in {spec!r}; use host or host:port")
            port = int(p)
        out[name] = (host, port)
    return out


def resolve(name: str, host: str) -> str:
    """The IPv4 address of host, the address the replicas listen on."""
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except socket.gaierror as e:
        raise ClusterError(f"{name} ({host}): cannot resolve the host name ({e.strerror}); "
                           "check --nodes or use an IP address") from None


class SshCluster(SshHosts):
    """Existing hosts. Nothing is created on them but /tmp/harness-<run id>/."""

    def __init__(self, run_id: str, nodes: str | list[str], record: RunRecord, user: str = "root",
                 key_path: str = "~/.ssh/id_ed25519", known_hosts: str = "~/.ssh/known_hosts",
                 python: str = "python3", connect_timeout: float = 10.0, roles=DEFAULT_ROLES):
        self.run_id = run_id
        self.record = record
        self.hosts = parse_nodes(nodes, roles)
        self.nodes = len(self.hosts) - len(roles)
        self.user = user
        self.key_path = os.path.expanduser(key_path)
        self.known_hosts = os.path.expanduser(known_hosts)
        self.base_dir = f"/tmp/harness-{run_id}"
        self.layout = HostLayout(python=python, code_dir=f"{self.base_dir}/code",
                                 work_dir=f"{self.base_dir}/work")
        self.connect_timeout = connect_timeout
        self.remotes: dict[str, SshRemote] = {}

    def create(self) -> None:
        pkey = load_private_key(self.key_path)
        host_keys = load_known_hosts(self.known_hosts)
        for name, (host, port) in self.hosts.items():
            self.remotes[name] = SshRemote(
                name, resolve(name, host), host=host, port=port, user=self.user, pkey=pkey,
                host_keys=host_keys, state_dir=f"{self.base_dir}/daemons",
                key_hint=f"--ssh-key {self.key_path}", known_hosts_hint=self.known_hosts,
                connect_timeout=self.connect_timeout)
        try:
            for name, remote in self.remotes.items():
                self.record.add("ssh-host", name=name, host=remote.host, port=remote.port,
                                user=self.user, key=self.key_path, known_hosts=self.known_hosts,
                                base_dir=self.base_dir)
            self._each(lambda r: r.connect())
            self._each(self._check_host)
        except BaseException:
            self.destroy()
            raise

    def _check_host(self, remote: SshRemote) -> None:
        py = self.layout.python
        out = remote.run_shell(f"command -v {shlex.quote(py)} && mkdir -p {shlex.quote(self.base_dir)}",
                               check=False)
        if out.returncode != 0:
            raise ClusterError(f"{remote.where}: {py} not found or {self.base_dir} not writable; "
                               f"install python3 (apt-get install python3) on {remote.host}")

    def destroy(self) -> None:
        """Kill this run's daemons and remove its files on every host we reach."""
        def clean(remote: SshRemote) -> None:
            try:
                if remote._client is not None:
                    remote.run_shell(kill_and_remove_script(self.base_dir), check=False, timeout=30)
            except (ClusterError, OSError, paramiko.SSHException):
                pass
            remote.close()
        self._each(clean)
        self.remotes = {}


def kill_and_remove_script(base_dir: str) -> str:
    """Shell: SIGKILL every daemon whose pid file is under base_dir/daemons
    (if it is still the same process), take out the nemesis's iptables chain
    (hosts outlive the run), then remove base_dir."""
    q, chain = shlex.quote(base_dir), shlex.quote(NEMESIS_CHAIN)
    return (f"for f in {q}/daemons/*.pid; do [ -f \"$f\" ] || continue; read pid st < \"$f\"; "
            f"s=$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -d' ' -f20); "
            f"[ \"$s\" = \"$st\" ] && kill -9 \"$pid\"; done; "
            f"if command -v iptables >/dev/null && iptables -w -n -L {chain} >/dev/null 2>&1; then "
            f"iptables -w -D INPUT -j {chain} 2>/dev/null; iptables -w -F {chain}; "
            f"iptables -w -X {chain}; fi; {_fault_cleanup(base_dir)}rm -rf {q}; true")


def _fault_cleanup(base_dir: str) -> str:
    """Shell of every registered fault that leaves state on a host (FaultKind.host_cleanup:
    lazyfs mounts, qdiscs), each followed by `; `."""
    from harness import registry

    parts = []
    for name in registry.names(registry.FAULTS):
        try:
            hook = registry.fault(name).host_cleanup
        except (registry.RegistryError, AttributeError):
            continue
        if hook is not None:
            parts.append(hook(base_dir) + "; ")
    return "".join(parts)


def release_resources(resources: list[dict]) -> list[str]:
    """The backend's part of `harness cleanup` (harness.cleanup calls every backend's `release_resources`)."""
    return release_ssh(resources) if any(r.get("kind") == "ssh-host" for r in resources) else []


def release_ssh(resources: list[dict]) -> list[str]:
    """After a crash: reconnect to every `ssh-host` in a run record and remove
    what the run left there. Unreachable hosts are reported, not fatal."""
    done = []
    for r in resources:
        if r.get("kind") != "ssh-host":
            continue
        try:
            remote = SshRemote(r["name"], r["host"], host=r["host"], port=r["port"], user=r["user"],
                               pkey=load_private_key(r["key"]),
                               host_keys=load_known_hosts(r["known_hosts"]),
                               key_hint=r["key"], known_hosts_hint=r["known_hosts"])
            remote.connect()
            try:
                remote.run_shell(kill_and_remove_script(r["base_dir"]), check=False)
            finally:
                remote.close()
            done.append(f"ssh {r['user']}@{r['host']}:{r['base_dir']}")
        except ClusterError as e:
            done.append(f"ssh {r['host']}: not cleaned ({e})")
    return done


def make_cluster(spec, run_id: str, record: RunRecord, work_dir: str, roles=DEFAULT_ROLES) -> SshCluster:
    """The runner's factory; spec.backend_options carries `hosts` (the
    --hosts list: the role hosts first), `ssh_user`, `ssh_key`, `known_hosts`."""
    opts = dict(spec.backend_options or {})
    hosts = opts.get("hosts") or opts.get("nodes")
    if not hosts:
        raise ClusterError("the ssh backend needs the hosts: --hosts ctl-host,broker1,broker2,... "
                           "(backend_options.hosts in a spec file)")
    cluster = SshCluster(run_id, hosts, record, user=opts.get("ssh_user", "root"),
                         key_path=opts.get("ssh_key", "~/.ssh/id_ed25519"),
                         known_hosts=opts.get("known_hosts", "~/.ssh/known_hosts"), roles=roles)
    if cluster.nodes != spec.nodes:
        given = " + ".join([*roles, f"{cluster.nodes} data nodes"])
        raise ClusterError(f"{cluster.nodes + len(roles)} hosts given ({given}) but the "
                           f"spec has nodes={spec.nodes}; pass --nodes {cluster.nodes} or "
                           f"{spec.nodes + len(roles)} hosts")
    return cluster

"""Cluster backend `docker`: one container per host on an internal network.

The harness creates, per run, a bridge network with `internal=True` (no route
out of it) and an explicit subnet (by default the first free /24 of
10.211.0.0/16, apart from the netns default 10.210.0.0/24), and one container per host (`ctl`, `n1..nN`, hostnames likewise)
from the node image (docker/Dockerfile: python3, iproute2, iptables, procps,
sshd; nothing of the project). Containers get NET_ADMIN so that iptables
faults work inside them, and Docker's init as pid 1 so that killed daemons are
reaped.

Control goes over SSH exactly as on the ssh backend: a fresh ed25519 key per
cluster (its public half handed to sshd through the container's environment),
host keys read from each container through the Docker API and pinned.

Everything created carries the labels `harness.run=<run id>` and the owner's
pid, so `cleanup_docker()` finds what a killed run left behind.
"""
from __future__ import annotations

import base64
import ipaddress
import os
import time
from concurrent.futures import ThreadPoolExecutor

import paramiko

from harness.cleanup import OWNER_EXIT_WAIT, RunRecord, _proc_start_time, owner_state, wait_gone
from harness.cluster.base import DEFAULT_ROLES, ClusterError, HostLayout, address_plan
from harness.cluster.ssh import SshHosts
from harness.remote.ssh import (GeneratedEd25519Key, SshRemote, SshUnreachable, new_ed25519_key,
                                 public_line)

DEFAULT_SUBNET = "10.211.0.0/24"
AUTO_RANGE = "10.211.0.0/16"  # where an unspecified subnet is looked for
DEFAULT_IMAGE = os.environ.get("HARNESS_NODE_IMAGE", "harness-node:latest")
LABEL_RUN = "harness.run"
LABEL_OWNER_PID = "harness.owner-pid"
LABEL_OWNER_START = "harness.owner-start"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
BUILD_HINT = "build it with docker/build-base.sh (offline) or pass --image"
START_TIMEOUT = 30.0


def docker_client(base_url: str | None = None):
    """A Docker SDK client, or a one-line ClusterError saying how to get an engine."""
    import docker
    from docker.errors import DockerException
    try:
        client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        client.ping()
        return client
    except DockerException as e:
        where = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        text = str(e)
        if "PermissionError" in text or "Permission denied" in text:
            raise ClusterError(f"Docker engine at {where}: permission denied; run as root or "
                               "join the docker group") from None
        reason = ("no such socket" if "FileNotFoundError" in text
                  else "connection refused" if "refused" in text else _short(e))
        raise ClusterError(f"no Docker engine at {where} ({reason}); start one with "
                           "scripts/ensure-docker.sh, or use --backend netns") from None


def host_addresses(subnet: str, nodes: int, roles=DEFAULT_ROLES) -> tuple[str, dict[str, str]]:
    """(gateway, {host: ip}): the harness side of the bridge is the first
    address; the hosts as on netns (base.address_plan)."""
    return address_plan(subnet, nodes, DEFAULT_SUBNET, roles)


class DockerCluster(SshHosts):
    """Containers as hosts, controlled over SSH from the harness machine,
    which reaches them through the bridge (the gateway address plays the
    client host: no grudge names it)."""

    def __init__(self, run_id: str, nodes: int, record: RunRecord, subnet: str | None = None,
                 image: str = DEFAULT_IMAGE, docker_url: str | None = None,
                 layout: HostLayout | None = None, fuse: bool = False, roles=DEFAULT_ROLES):
        self.run_id = run_id
        self.fuse = fuse  # /dev/fuse and CAP_SYS_ADMIN in the containers (lazyfs, for power faults)
        self.nodes = nodes
        self.roles = tuple(roles)
        self.record = record
        # None: the first free /24 from DEFAULT_SUBNET on, so that runs can
        # share the engine; an explicit subnet is used as given or refused.
        self.auto_subnet = subnet is None
        self._set_subnet(subnet or DEFAULT_SUBNET)
        self.image = image
        self.docker_url = docker_url
        self.layout = layout or HostLayout()
        self.network_name = f"hx-{run_id}"
        self.remotes: dict[str, SshRemote] = {}
        self.containers: dict[str, object] = {}
        self.key: GeneratedEd25519Key | None = None
        self._client = None
        self._network = None

    def _set_subnet(self, subnet: str) -> None:
        self.gateway, self.addresses = host_addresses(subnet, self.nodes, self.roles)  # validates the subnet
        self.subnet = str(ipaddress.ip_network(subnet, strict=False))

    def _create_network(self, client, labels: dict):
        """The run's internal network; in auto mode the next /24 of
        AUTO_RANGE while the current one overlaps another network."""
        import docker.types
        from docker.errors import APIError
        tries = 256 if self.auto_subnet else 1
        for attempt in range(tries):
            ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                subnet=self.subnet, gateway=self.gateway)])
            try:
                return client.networks.create(self.network_name, driver="bridge", internal=True,
                                              ipam=ipam, labels=labels, check_duplicate=True)
            except APIError as e:
                if "overlap" not in str(e).lower() or attempt == tries - 1:
                    hint = "pick a free --subnet" if not self.auto_subnet else \
                        f"pass a --subnet outside {AUTO_RANGE}"
                    raise ClusterError(f"docker network {self.network_name} on {self.subnet}: "
                                       f"{_short(e)}; {hint} or run `harness cleanup`") from None
            nxt = ipaddress.ip_network(self.subnet).network_address + 256
            if nxt not in ipaddress.ip_network(AUTO_RANGE):
                nxt = ipaddress.ip_network(AUTO_RANGE).network_address
            self._set_subnet(f"{nxt}/24")

    def container_name(self, host: str) -> str:
        return f"hx-{self.run_id}-{host}"

    def _labels(self) -> dict[str, str]:
        pid = os.getpid()
        return {LABEL_RUN: self.run_id, LABEL_OWNER_PID: str(pid),
                LABEL_OWNER_START: str(_proc_start_time(pid) or 0)}

    # -- lifecycle -----------------------------------------------------------
    def create(self) -> None:
        try:
            self._create()
        except BaseException:
            self.destroy()
            raise

    def _create(self) -> None:
        from docker.errors import ImageNotFound
        client = self._client = docker_client(self.docker_url)
        try:
            client.images.get(self.image)
        except ImageNotFound:
            raise ClusterError(f"docker image {self.image} not found; {BUILD_HINT}") from None
        self.key = new_ed25519_key()
        labels = self._labels()
        self.record.add("docker-network", name=self.network_name)
        self._network = self._create_network(client, labels)
        for host, addr in self.addresses.items():
            self.record.add("docker-container", name=self.container_name(host))
            self.containers[host] = self._create_container(client, host, addr, labels)
        with ThreadPoolExecutor(max_workers=len(self.addresses)) as pool:
            list(pool.map(lambda h: self.containers[h].start(), self.addresses))
            list(pool.map(self._connect, self.addresses))
        self.remotes = {h: self.remotes[h] for h in self.addresses}  # ctl, n1, n2, ... in order

    def _create_container(self, client, host: str, addr: str, labels: dict):
        api = client.api
        fuse = {"devices": ["/dev/fuse:/dev/fuse:rwm"], "security_opt": ["apparmor:unconfined"]} if self.fuse else {}
        host_config = api.create_host_config(cap_add=["NET_ADMIN"] + (["SYS_ADMIN"] if self.fuse else []),
                                             init=True, network_mode=self.network_name, **fuse)
        networking = api.create_networking_config(
            {self.network_name: api.create_endpoint_config(ipv4_address=addr)})
        from docker.errors import APIError
        try:
            created = api.create_container(
                self.image, name=self.container_name(host), hostname=host, labels=labels,
                environment={"AUTHORIZED_KEY": public_line(self.key, f"harness-{self.run_id}")},
                host_config=host_config, networking_config=networking, detach=True)
        except APIError as e:
            raise ClusterError(f"docker container {self.container_name(host)}: {_short(e)}; "
                               "run `harness cleanup` if an old run left it") from None
        return client.containers.get(created["Id"])

    def _read_host_key(self, host: str) -> paramiko.PKey:
        """The container's sshd host key, read through the Docker API (the
        trusted path), so that SSH can pin it instead of trusting on first use."""
        from docker.errors import APIError
        container = self.containers[host]
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                code, out = container.exec_run(["cat", HOST_KEY])
            except APIError:  # not running (any more): reported below
                code, out = -1, b""
            if code == 0 and out.strip():
                keytype, b64 = out.decode().split()[:2]
                return paramiko.PKey.from_type_string(keytype, base64.b64decode(b64))
            container.reload()
            if container.status not in ("running", "created") or time.monotonic() > deadline:
                logs = container.logs(tail=3).decode(errors="replace").strip().replace("\n", " | ")
                raise ClusterError(f"{host} (container {container.name}): sshd did not come up "
                                   f"(status {container.status}; {logs or 'no output'}); "
                                   f"is {self.image} built from docker/Dockerfile? {BUILD_HINT}")
            time.sleep(0.1)

    def _connect(self, host: str) -> None:
        host_key = self._read_host_key(host)
        addr = self.addresses[host]
        known = paramiko.HostKeys()
        known.add(addr, host_key.get_name(), host_key)
        remote = SshRemote(host, addr, pkey=self.key, host_keys=known, user="root",
                           state_dir=os.path.join(self.layout.work_dir, ".daemons"),
                           key_hint="the cluster's generated key",
                           known_hosts_hint=f"the key read from container {self.container_name(host)}")
        self.remotes[host] = remote  # so that destroy() closes it whatever happens next
        deadline = time.monotonic() + START_TIMEOUT
        while True:  # sshd writes its key before it listens: retry while refused
            try:
                remote.connect()
                break
            except SshUnreachable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # Docker gives even internal networks a default route (to a gateway
        # that forwards nothing); drop it so no packet is even tried outside.
        remote.run(["ip", "route", "del", "default"], check=False)

    def destroy(self) -> None:
        for remote in self.remotes.values():
            remote.close()
        self.remotes = {}
        if self._client is None:
            return
        remove_run(self._client, self.run_id)
        self.containers = {}
        self._network = None

    # -- for tests and debugging -------------------------------------------
    def write_ssh_files(self, directory: str) -> tuple[str, str]:
        """Write the cluster's private key and a known_hosts file of its pinned
        host keys into `directory` (mode 0600); returns (key path, known_hosts
        path), so that the same hosts can be driven by the ssh backend or by
        `ssh -i KEY -o UserKnownHostsFile=KNOWN root@IP`."""
        assert self.key is not None
        os.makedirs(directory, mode=0o700, exist_ok=True)
        key_path = os.path.join(directory, "id_ed25519")
        known_path = os.path.join(directory, "known_hosts")
        self.key.write_private_key_file(key_path)
        hk = paramiko.HostKeys()
        for host in self.remotes:
            key = self._read_host_key(host)
            hk.add(self.addresses[host], key.get_name(), key)
        hk.save(known_path)
        return key_path, known_path


def remove_run(client, run_id: str | None) -> list[str]:
    """Remove the containers, then the networks, of one run (None: all runs), and
    list what this call removed. Another process may be removing the same run at
    once (two `harness cleanup`s: the suite's streams run it side by side); its
    objects are waited for, not listed, and not an error."""
    from docker.errors import APIError, NotFound
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    removed = []
    # ignore_removed: the list inspects each container, and another stream's
    # cleanup may remove one between the list and its inspect (a 404 in CI)
    for c in client.containers.list(all=True, filters={"label": label}, ignore_removed=True):
        try:
            c.remove(force=True, v=True)
            removed.append(f"container {c.name}")
        except NotFound:
            pass
        except APIError as e:
            if e.status_code != 409:      # 409: "removal of container ... is already in progress"
                raise
            _wait_removed(lambda: client.containers.get(c.id), e)
    for n in client.networks.list(filters={"label": label}):
        try:
            note = _remove_network(n)
            removed.append(f"network {n.name}" + (f" ({note})" if note else ""))
        except NotFound:
            pass
    return removed


REMOVE_WAIT = 20.0   # s: for another process's removal, or for endpoints the engine is still letting go


def _wait_removed(get, error: Exception) -> None:
    """Until get() raises NotFound (someone else's removal finished); else raise `error`."""
    from docker.errors import NotFound
    deadline = time.monotonic() + REMOVE_WAIT
    while time.monotonic() < deadline:
        try:
            get()
        except NotFound:
            return
        time.sleep(0.2)
    raise error


def _remove_network(n) -> str:
    """Remove one network; '' or why it took more than one try. Endpoints still
    attached (a container's removal lags on a loaded engine): disconnect them and
    retry for up to REMOVE_WAIT. NotFound (removed meanwhile) propagates."""
    from docker.errors import APIError, NotFound
    deadline, first = time.monotonic() + REMOVE_WAIT, None
    while True:
        try:
            n.remove()
            return _short(first) if first else ""
        except NotFound:
            raise
        except APIError as e:
            if first is None:
                first = e                      # disconnect at once, then retry
            elif time.monotonic() >= deadline:
                raise
            else:
                time.sleep(0.5)
        n.reload()
        for c in n.containers:
            try:
                n.disconnect(c, force=True)
            except NotFound:
                pass


def cleanup_docker(run_id: str | None = None, include_live: bool = False,
                   docker_url: str | None = None) -> list[str]:
    """Remove what harness runs left in Docker: every labelled container and
    network of runs whose owner process is gone (or of `run_id`, or of all
    runs with include_live). No engine: nothing to clean, returns []."""
    try:
        client = docker_client(docker_url)
    except ClusterError:
        return []
    runs: set[str] = set()
    owners: dict[str, tuple[int, int]] = {}
    objects = client.containers.list(all=True, filters={"label": LABEL_RUN}, ignore_removed=True) + \
        client.networks.list(filters={"label": LABEL_RUN})
    for obj in objects:
        labels = obj.attrs.get("Labels") or obj.attrs.get("Config", {}).get("Labels") or {}
        rid = labels.get(LABEL_RUN)
        if rid is None:
            continue
        runs.add(rid)
        owners[rid] = (int(labels.get(LABEL_OWNER_PID, 0)), int(labels.get(LABEL_OWNER_START, 0)))
    removed = []
    for rid in sorted(runs):
        if run_id is not None and rid != run_id:
            continue
        pid, start = owners[rid]
        if run_id is None and not include_live and pid:
            # a zombie or a harness still exiting from SIGKILL is not a live run
            state = owner_state(pid, start or None)
            if state == "dying":
                wait_gone(pid, start or None, OWNER_EXIT_WAIT)
                state = owner_state(pid, start or None)
            if state != "gone":
                continue
        removed += remove_run(client, rid)
    return removed


def _short(e: Exception) -> str:
    text = getattr(e, "explanation", None) or str(e)
    return " ".join(str(text).split())[:300]


def make_cluster(spec, run_id: str, record: RunRecord, work_dir: str, roles=DEFAULT_ROLES) -> DockerCluster:
    """The runner's factory. The subnet is the spec's only when set
    explicitly (its default is the netns one), else the first free /24 of
    AUTO_RANGE; backend_options may give
    `subnet`, `image` and `docker_url`. `work_dir` (a path on the harness
    machine) is unused: containers keep their files under layout.work_dir."""
    opts = dict(spec.backend_options or {})
    subnet = opts.get("subnet") or (spec.subnet if "subnet" in spec.model_fields_set else None)
    fuse = bool(opts.get("fuse"))  # a fault that mounts FUSE file systems asked for it (nemesis/power.py)
    return DockerCluster(run_id, spec.nodes, record, subnet=subnet,
                         image=opts.get("image", DEFAULT_IMAGE), docker_url=opts.get("docker_url"), fuse=fuse,
                         roles=roles)

"""A real local replica cluster for tests: one controller and N brokers on 127.0.0.1.

Processes run ``python -m replica.controller_process`` / ``python -m replica.broker_process``
exactly as documented in docs/interfaces.md, with free ports, temporary data
dirs, a fresh cluster secret and scaled-down timings. Every process gets PR_SET_PDEATHSIG(SIGKILL), so
it dies with the test process even if pytest itself is killed, and the
fixture's teardown SIGKILLs whatever is left: no process survives a test.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replica.client import Client

REPO = Path(__file__).resolve().parents[2]

# Kafka's timings scaled down so a failover test takes seconds, not minutes.
FAST_SETTINGS = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "replica.high.watermark.checkpoint.interval.ms": 500,
    "isr.change.propagation.interval.ms": 200,
    "isr.change.propagation.blackout.ms": 500,
    "request.timeout.ms": 10000,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the child when the test process dies (Linux prctl)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LocalCluster:
    """Processes of one test cluster; ``close()`` kills them all (the fixture calls it)."""

    def __init__(self, root: Path, brokers: int = 3, era: str = "epoch", settings: dict | None = None,
                 profile_dir: Path | None = None, remote_store: bool = False):
        self.root = Path(root)
        self.profile_dir = profile_dir        # run each process under cProfile, dump there at SIGTERM
        self.era = era
        self.settings = {**FAST_SETTINGS, **(settings or {})}
        self.broker_ids = list(range(1, brokers + 1))
        self.controller_address = ("127.0.0.1", free_port())
        self.addresses = {b: ("127.0.0.1", free_port()) for b in self.broker_ids}
        self.store_address = ("127.0.0.1", free_port()) if remote_store else None
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, object] = {}
        self.secret_file = self.root / "cluster-secret"

    def _secret_args(self) -> list[str]:
        """``--cluster-secret-file``, written on first use (none for a replica tree
        older than the flag: bench/produce_throughput.py --compare runs one)."""
        if "--cluster-secret-file" not in (Path(REPO) / "replica" / "shell.py").read_text():
            return []
        if not self.secret_file.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            self.secret_file.write_text(secrets.token_hex(16) + "\n")
            self.secret_file.chmod(0o600)
        return ["--cluster-secret-file", str(self.secret_file)]

    # ------------------------------------------------------------------ paths
    def data_dir(self, broker_id: int | str) -> Path:
        name = broker_id if isinstance(broker_id, str) else f"n{broker_id}"
        return self.root / name / "data"

    def log_path(self, name: str) -> Path:
        return self.root / name / "process.log"

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path(name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # ---------------------------------------------------------------- processes
    def _settings_args(self) -> list[str]:
        args = []
        for key, value in self.settings.items():
            args += ["--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
        return args

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        old = self.procs.get(name)
        if old is not None and old.poll() is None:
            raise RuntimeError(f"{name} is already running (pid {old.pid})")
        self.log_path(name).parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path(name), "ab")
        self._logs[name] = log
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        prefix = [sys.executable]
        if self.profile_dir is not None:
            Path(self.profile_dir).mkdir(parents=True, exist_ok=True)
            prefix += ["-m", "cProfile", "-o", str(Path(self.profile_dir) / f"{name}.prof")]
        proc = subprocess.Popen([*prefix, "-m", *argv], cwd=str(REPO), env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_die_with_parent)
        self.procs[name] = proc
        return proc

    def start_controller(self) -> None:
        host, port = self.controller_address
        self.data_dir("ctl").mkdir(parents=True, exist_ok=True)
        self._spawn("ctl", ["replica.controller_process", "--listen", f"{host}:{port}",
                            "--data-dir", str(self.data_dir("ctl")), "--era", self.era,
                            *self._secret_args(), *self._settings_args()])
        self._wait_listening("ctl", self.controller_address)

    def start_broker(self, broker_id: int) -> None:
        host, port = self.addresses[broker_id]
        chost, cport = self.controller_address
        self.data_dir(broker_id).mkdir(parents=True, exist_ok=True)
        self._spawn(f"n{broker_id}", ["replica.broker_process", "--id", str(broker_id), "--listen", f"{host}:{port}",
                                      "--controller", f"{chost}:{cport}", "--data-dir",
                                      str(self.data_dir(broker_id)), "--era", self.era,
                                      *self._secret_args(), *self._store_args(), *self._settings_args()])
        self._wait_listening(f"n{broker_id}", self.addresses[broker_id])

    def _store_args(self) -> list[str]:
        return ["--remote-store", "%s:%d" % self.store_address] if self.store_address else []

    def start_store(self) -> None:
        """The tiered-storage object store (``replica.remote_store``) as process ``store``."""
        host, port = self.store_address
        self.data_dir("store").mkdir(parents=True, exist_ok=True)
        self._spawn("store", ["replica.remote_store", "--listen", f"{host}:{port}",
                              "--data-dir", str(self.data_dir("store"))])
        self._wait_listening("store", self.store_address)

    def start(self) -> "LocalCluster":
        if self.store_address:
            self.start_store()
        self.start_controller()
        for b in self.broker_ids:
            self.start_broker(b)
        return self

    def _wait_listening(self, name: str, address: tuple[str, int], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc = self.procs[name]
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode} while starting:\n{self.log_tail(name)}")
            try:
                socket.create_connection(address, timeout=0.5).close()
                return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} does not listen on {address} after {timeout}s:\n{self.log_tail(name)}")
            time.sleep(0.05)

    def signal(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[f"n{broker_id}"]
        proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            proc.wait(timeout=20)

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM every process and wait (a clean exit writes cProfile output); then close()."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.close()

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for log in self._logs.values():
            log.close()

    # ------------------------------------------------------------------- client
    def bootstrap(self) -> list[tuple[str, int]]:
        return [self.controller_address] + [self.addresses[b] for b in self.broker_ids]

    def client(self, request_timeout: float = 10.0) -> Client:
        return Client(self.bootstrap(), request_timeout=request_timeout)

    async def wait_registered(self, client: Client, broker_ids=None, timeout: float = 20.0) -> None:
        """Wait until the controller's metadata lists the brokers."""
        wanted = set(self.broker_ids if broker_ids is None else broker_ids)
        deadline = time.monotonic() + timeout
        while True:
            response = await client.call(self.controller_address, "Metadata", topic=None)
            if wanted <= {int(b) for b in (response.get("brokers") or {})}:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"brokers {wanted} not registered after {timeout}s: {response}")
            await asyncio.sleep(0.1)


async def read_partition(client: Client, partition: int, until: int, topic: str = "log",
                         timeout: float = 60.0) -> list:
    """Every (offset, value) of a partition from offset 0 up to ``until``, as a consumer reads them."""
    records, offset = [], 0
    deadline = time.monotonic() + timeout
    while offset < until:
        if time.monotonic() > deadline:
            raise AssertionError(f"consumer of {topic}-{partition} stuck at offset {offset} of {until}")
        batch, _hw = await client.fetch(topic, partition, offset, max_records=1000)
        if not batch:
            await asyncio.sleep(0.05)
            continue
        records.extend(batch)
        offset = batch[-1][0] + 1
    return records


@pytest.fixture
def local_cluster(tmp_path):
    """Factory: ``local_cluster(brokers=3, era="epoch", settings={...})`` -> a started LocalCluster."""
    made: list[LocalCluster] = []

    def make(brokers: int = 3, era: str = "epoch", settings: dict | None = None,
             remote_store: bool = False) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"cluster{len(made)}", brokers, era, settings,
                               remote_store=remote_store)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.close()
        for name in cluster.procs:          # shown by pytest only when the test failed
            print(f"----- {name}: last lines of {cluster.log_path(name)} -----\n{cluster.log_tail(name, 15)}")
    for cluster in made:
        for name, proc in cluster.procs.items():
            assert proc.poll() is not None, f"{name} (pid {proc.pid}) survived teardown"

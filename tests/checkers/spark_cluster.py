"""A Spark standalone cluster on 127.0.0.1 from the installed pyspark: one master, N workers.

Why not sbin/start-*.sh: they daemonize (nohup, pid files under /tmp) and
leave processes behind when a test dies; here every JVM is a child started in
its own process group and stopped (SIGTERM, then SIGKILL) in `stop`, so the
test leaves nothing running. Logs and work dirs live under the given folder.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"spark process exited with {proc.returncode} before port {port} opened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")


class StandaloneCluster:
    """master + workers; `url` is spark://127.0.0.1:PORT."""

    def __init__(self, folder: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.procs: list[subprocess.Popen] = []
        self.env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_LOG_DIR=str(folder / "logs"), SPARK_NO_DAEMONIZE="1",
                        # The master and worker only schedule: C1 and the serial collector are
                        # enough (test_spark_cluster, cgroup CPU: 86.3 -> 80.7 CPU-s, 2026-11-29).
                        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "wb")
        proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 120) -> "StandaloneCluster":
        try:
            master = self._start("master", "org.apache.spark.deploy.master.Master",
                                 "--host", "127.0.0.1", "--port", str(self.port),
                                 "--webui-port", str(free_port()))
            wait_port(self.port, master, timeout)
            for n in range(self.workers):
                work = self.folder / f"worker-{n}"
                work.mkdir(parents=True, exist_ok=True)
                self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", self.url,
                            "--host", "127.0.0.1", "--cores", str(self.cores),
                            "--memory", self.memory, "--work-dir", str(work),
                            "--webui-port", str(free_port()))
            self.wait_workers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_workers(self, timeout: float) -> None:
        """Until the master's log says every worker registered."""
        deadline = time.monotonic() + timeout
        log = self.folder / "master.log"
        while time.monotonic() < deadline:
            if log.read_text(errors="replace").count("Registering worker") >= self.workers:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.workers} workers did not register with {self.url} in {timeout:g} s")

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

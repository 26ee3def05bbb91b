"""Remote for hosts that share this machine's file system: plain local
processes, or processes inside a network namespace (`ip netns exec NS`).

`ip netns exec` execs the command after joining the namespace, so the pid we
get is the daemon's own pid and signals reach it directly.
"""
from __future__ import annotations

import os
import shutil
import signal as _signal
import subprocess
from typing import Callable


class LocalRemote:
    """A host on this machine. `netns` None means the harness's own namespace."""

    def __init__(self, name: str, address: str, netns: str | None = None,
                 on_start: Callable[[int, str | None], None] | None = None):
        self.name = name
        self.address = address
        self.netns = netns
        self._on_start = on_start  # records daemon pids for `harness cleanup`
        self._daemons: dict[str, subprocess.Popen] = {}

    def _wrap(self, argv: list[str]) -> list[str]:
        return (["ip", "netns", "exec", self.netns] if self.netns else []) + list(argv)

    def run(self, argv: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(self._wrap(argv), capture_output=True, text=True, check=check, timeout=timeout)

    def start_daemon(self, name: str, argv: list[str], log_path: str, env: dict | None = None) -> int:
        old = self._daemons.get(name)
        if old is not None and old.poll() is None:
            raise RuntimeError(f"{self.name}: daemon {name} is still running (pid {old.pid})")
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        full_env = dict(os.environ, **(env or {}))
        with open(log_path, "ab", buffering=0) as log:
            proc = subprocess.Popen(self._wrap(argv), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=full_env, start_new_session=True)
        self._daemons[name] = proc
        if self._on_start:
            self._on_start(proc.pid, self.netns)
        return proc.pid

    def signal(self, name: str, sig: int) -> None:
        proc = self._daemons.get(name)
        if proc is None or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass
        if sig == _signal.SIGKILL:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def daemon_running(self, name: str) -> bool:
        proc = self._daemons.get(name)
        return proc is not None and proc.poll() is None

    def put(self, local_path: str, remote_path: str) -> None:
        _copy(local_path, remote_path)

    def get(self, remote_path: str, local_path: str) -> None:
        _copy(remote_path, local_path)


def _copy(src: str, dst: str) -> None:
    if os.path.abspath(src) == os.path.abspath(dst):
        return
    if os.path.isdir(src):
        shutil.copytree(src, dst, dirs_exist_ok=True, symlinks=True)
    else:
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        shutil.copy2(src, dst)

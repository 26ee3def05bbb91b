"""What every system whose processes are daemons started through Remote
(one per host, named after the host) shares: the signals behind
harness.sut.Process and Pausable, the graceful stop of a teardown, and the
one line that says why a daemon died at startup. A DB class mixes this in
and provides `cluster` and `log_path(node)`."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time


class NodeDaemons:
    cluster = None

    def log_path(self, node: str) -> str:
        raise NotImplementedError

    def running(self, node: str) -> bool:
        return self.cluster.remotes[node].daemon_running(node)

    def kill(self, node: str) -> None:
        self.cluster.remotes[node].signal(node, signal.SIGKILL)

    def pause(self, node: str) -> None:
        self.cluster.remotes[node].signal(node, signal.SIGSTOP)

    def resume(self, node: str) -> None:
        self.cluster.remotes[node].signal(node, signal.SIGCONT)

    def stop_daemons(self, nodes: list[str], grace: float) -> None:
        """SIGCONT (a paused one) and SIGTERM to all, then SIGKILL after `grace` s."""
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

    def exited_at_startup(self, nodes: list[str], what: str) -> str | None:
        """'<what> on <node> exited at startup: <last log line>' for the first dead one."""
        for node in nodes:
            if not self.running(node):
                out = self.cluster.remotes[node].run(["tail", "-n", "5", self.log_path(node)], check=False).stdout
                return f"{what} on {node} exited at startup: {last_line(out)}"
        return None


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 free right now (for a helper process of this machine's own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_line(text: str) -> str:
    """Last non-empty line of a log tail, for one-line errors."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(empty log)"


def read_remote_file(remote, path: str, parse, errors: tuple = ()):
    """parse(local copy) of a file on a host, or None when it is not there yet,
    cannot be fetched right now (the node is unreachable) or does not parse."""
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, os.path.basename(path))
        try:
            remote.get(path, local)
            return parse(local)
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError, *errors):
            return None


def empty_dir(remote, path: str) -> int:
    """Remove everything under `path`, keeping the directory itself (a faults layer may be
    mounted on it): a replaced disk. -> the number of files removed."""
    script = 'n=$(find "$1" -mindepth 1 -type f 2>/dev/null | wc -l); find "$1" -mindepth 1 -delete && ' \
             'mkdir -p "$1" && sync "$1" && echo "$n"'
    out = remote.run(["sh", "-c", script, "sh", path], timeout=120)
    return int(out.stdout.strip().splitlines()[-1])


"""The harness side of lazyfs: mount it under the system's data directories
before the system starts, drop unsynced writes on a power failure, unmount
at teardown. Everything goes through Remote calls, so it works on every
backend:

- netns: the daemon runs in the harness machine's own mount namespace (not
  through `ip netns exec`, whose private mount namespace would hide the
  mount from the system's processes); it needs no network. Each mount is
  recorded (`fuse-mount`) before it is made, so `harness cleanup` unmounts
  what a killed run left.
- docker and ssh: this package and mfusepy.py are uploaded next to the
  run's files and run with the host's python3 (Debian's libfuse3-3 and
  /dev/fuse needed); the backends' own cleanup unmounts under the run's
  folder before removing it.
"""
from __future__ import annotations

import os
import posixpath
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[2]
FILES = ("nemesis/__init__.py", "nemesis/lazyfs/__init__.py", "nemesis/lazyfs/__main__.py",
         "nemesis/lazyfs/fs.py", "nemesis/lazyfs/overlay.py")
FIX = ("install fuse3 (apt-get install fuse3 libfuse3-3) and make /dev/fuse available "
       "(docker: the harness passes it in; ssh: modprobe fuse)")


class LazyFsError(RuntimeError):
    """A mount or a control command failed; one line."""


@dataclass
class Mount:
    node: str
    remote: object           # where the daemon runs
    mountpoint: str          # the system's data directory
    backing: str             # where synced data really lives
    control: str             # the control socket
    python: str
    pythonpath: str
    daemon: str              # the daemon's Remote name


def _local(remote) -> bool:
    from harness.remote.local import LocalRemote
    return isinstance(remote, LocalRemote)


def mfusepy_file() -> str:
    import mfusepy
    return mfusepy.__file__


class LazyFsMounts:
    """The lazyfs mounts of one run, one per node."""

    def __init__(self, cluster, record=None, log=lambda m: None):
        self.cluster = cluster
        self.record = record
        self.log = log
        self.mounts: dict[str, Mount] = {}
        self._uploaded: set[str] = set()

    # -- setup ----------------------------------------------------------------
    def _where(self, node: str):
        """(remote to run the daemon, python, PYTHONPATH) for a node's host."""
        remote = self.cluster.remotes[node]
        if _local(remote):
            from harness.remote.local import LocalRemote
            on_start = getattr(remote, "_on_start", None)
            host = LocalRemote(remote.name, remote.address, netns=None, on_start=on_start)
            path = os.pathsep.join([str(REPO_DIR), os.path.dirname(mfusepy_file())])
            return host, self.cluster.layout.python, path
        code = posixpath.join(self.cluster.layout.work_dir, ".lazyfs-code")
        if node not in self._uploaded:
            for rel in FILES:
                remote.put(str(REPO_DIR / rel), posixpath.join(code, rel))
            remote.put(mfusepy_file(), posixpath.join(code, "mfusepy.py"))
            self._uploaded.add(node)
        return remote, "python3", code

    def _ctl(self, m: Mount, command: str, check: bool = True):
        out = m.remote.run(["env", f"PYTHONPATH={m.pythonpath}", m.python, "-m", "nemesis.lazyfs", "ctl",
                            m.control, command], check=False, timeout=60)
        if check and out.returncode != 0:
            raise LazyFsError(f"lazyfs on {m.node}: {command}: {(out.stderr or out.stdout).strip()[:300]}")
        return out

    def check_host(self, node: str) -> None:
        """One line naming host and fix when lazyfs cannot run there."""
        remote, python, path = self._where(node)
        out = remote.run(["env", f"PYTHONPATH={path}", python, "-m", "nemesis.lazyfs", "check"], check=False)
        if out.returncode != 0:
            why = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["lazyfs check failed"]
            raise LazyFsError(f"fault power: host {node} cannot mount lazyfs ({why[0]}); {FIX}")

    def mount(self, node: str, data_dir: str) -> Mount:
        """Mount lazyfs at data_dir (which must not hold data yet)."""
        remote, python, path = self._where(node)
        base = data_dir.rstrip("/")
        m = Mount(node, remote, base, base + ".backing", posixpath.join(posixpath.dirname(base), "lazyfs.sock"),
                  python, path, f"lazyfs-{node}")
        if self.record is not None and _local(remote):
            self.record.add("fuse-mount", path=m.mountpoint, host=node)
        remote.run(["mkdir", "-p", m.mountpoint, m.backing])
        log_path = posixpath.join(posixpath.dirname(base), "lazyfs.log")
        remote.start_daemon(m.daemon, [python, "-m", "nemesis.lazyfs", "mount", m.backing, m.mountpoint,
                                       "--control", m.control], log_path, env={"PYTHONPATH": path})
        self.mounts[node] = m
        deadline = time.monotonic() + 15
        while True:
            mounted = remote.run(["grep", "-q", f" {m.mountpoint} fuse", "/proc/mounts"], check=False).returncode == 0
            if mounted and self._ctl(m, "ping", check=False).returncode == 0:
                return m
            if not remote.daemon_running(m.daemon) or time.monotonic() > deadline:
                tail = remote.run(["tail", "-n", "3", log_path], check=False).stdout.strip().replace("\n", " | ")
                raise LazyFsError(f"fault power: lazyfs did not mount on {node} ({tail or 'no output'}); {FIX}")
            time.sleep(0.05)

    # -- faults ---------------------------------------------------------------
    def drop(self, node: str, keep_names: bool = False) -> dict:
        """Lose the node's unsynced writes (call it with the process down);
        keep_names: only data, not names (Jepsen's LazyFS)."""
        import json
        m = self.mounts[node]
        out = self._ctl(m, "drop-data" if keep_names else "drop")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def stats(self, node: str) -> dict:
        import json
        return json.loads(self._ctl(self.mounts[node], "stats").stdout.strip().splitlines()[-1])

    def sync(self, node: str) -> dict:
        """Make everything the node's layer holds durable (LazyFS's checkpoint)."""
        import json
        return json.loads(self._ctl(self.mounts[node], "sync").stdout.strip().splitlines()[-1])

    # -- teardown -------------------------------------------------------------
    def unmount_all(self) -> None:
        for node in list(self.mounts):
            self.unmount(node)

    def unmount(self, node: str) -> None:
        m = self.mounts.pop(node)
        r = m.remote
        if r.run(["fusermount3", "-u", m.mountpoint], check=False).returncode != 0:
            r.run(["umount", "-l", m.mountpoint], check=False)
        deadline = time.monotonic() + 5
        while r.daemon_running(m.daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        if r.daemon_running(m.daemon):
            r.signal(m.daemon, signal.SIGKILL)
            r.run(["umount", "-l", m.mountpoint], check=False)


def unmount_script(base_dir: str) -> str:
    """Shell: lazily unmount every FUSE mount under base_dir (hosts that outlive a run)."""
    q = shlex.quote(base_dir.rstrip("/") + "/")
    return (f"awk -v b={q} '$3 ~ /^fuse/ && index($2, b) == 1 {{print $2}}' /proc/mounts "
            f"| while read -r m; do umount -l \"$m\" 2>/dev/null; done; true")

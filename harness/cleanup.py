"""Run records: what a run created, written *before* it is created.

A run that crashes (or is SIGKILLed) leaves namespaces, links, host iptables
rules, processes and scratch directories behind. Each live run keeps a JSON
record under RUN_DIR; `harness cleanup` reads the records of dead runs and
removes what they list, in an order that always works (processes first, then
namespaces, links, rules, files).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

RUN_DIR = Path(os.environ.get("HARNESS_RUN_DIR", "/run/harness"))


def _proc_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks (guards against pid reuse)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def pid_alive(pid: int, start_time: int | None) -> bool:
    """True if the process exists and is the one we recorded."""
    now = _proc_start_time(pid)
    return now is not None and (start_time is None or now == start_time)


PF_EXITING = 0x4  # the kernel's per-task flag: the task is inside do_exit()
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def owner_state(pid: int, start_time: int | None) -> str:
    """"alive", "dying" or "gone" for the recorded owner of a run.

    A SIGKILLed process does not vanish at once: its threads first take the
    signal and exit (state R or D, flag PF_EXITING, SIGKILL pending), then it
    stays a zombie until its parent reaps it. Its /proc entry exists all that
    time, so "the entry exists" is not "the run is alive": a zombie is gone,
    and a process with SIGKILL pending or any thread exiting is dying.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return "gone"
    if start_time is not None and int(fields[19]) != start_time:
        return "gone"  # the pid was reused
    if fields[0] in ("Z", "X", "x"):
        return "gone"
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            tfields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            status = (task / "status").read_text()
        except OSError:
            continue  # this thread is already gone
        if tfields[0] in ("Z", "X", "x") or int(tfields[6]) & PF_EXITING:
            return "dying"
        for line in status.splitlines():
            if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & SIGKILL_BIT:
                return "dying"
    return "alive"


def wait_gone(pid: int, start_time: int | None, timeout: float) -> bool:
    """Wait up to timeout seconds for a dying owner to be gone; True if it is."""
    deadline = time.monotonic() + timeout
    while owner_state(pid, start_time) != "gone":
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


class RunRecord:
    """The record file of one run; every mutation is written out at once."""

    def __init__(self, run_id: str, store: str | None = None, run_dir: Path | None = None):
        self.run_dir = Path(run_dir or RUN_DIR)
        self.path = self.run_dir / f"{run_id}.json"
        self._lock = threading.Lock()
        self.data = {
            "run_id": run_id,
            "pid": os.getpid(),
            "pid_start": _proc_start_time(os.getpid()),
            "store": store,
            "resources": [],
        }

    @classmethod
    def load(cls, path: Path) -> "RunRecord":
        rec = cls.__new__(cls)
        rec.run_dir, rec.path, rec._lock = path.parent, path, threading.Lock()
        rec.data = json.loads(path.read_text())
        return rec

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    def owner_alive(self) -> bool:
        return pid_alive(self.data["pid"], self.data.get("pid_start"))

    def owner_state(self) -> str:
        """"alive", "dying" (SIGKILLed, still exiting) or "gone" (zombies count as gone)."""
        return owner_state(self.data["pid"], self.data.get("pid_start"))

    def add(self, kind: str, **fields) -> None:
        """Record a resource before creating it."""
        with self._lock:
            self.data["resources"].append({"kind": kind, **fields})
            self._write()

    def add_pid(self, pid: int, netns: str | None = None) -> None:
        self.add("pid", pid=pid, start=_proc_start_time(pid), netns=netns)

    def _write(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def save(self) -> None:
        with self._lock:
            self._write()

    def remove_file(self) -> None:
        self.path.unlink(missing_ok=True)


def _quiet(argv: list[str]) -> int:
    return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def netns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()] if out.returncode == 0 else []


def _mounted(path: str) -> bool:
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    return any(line.split()[1] == path for line in lines if len(line.split()) > 1)


def release(record: RunRecord) -> list[str]:
    """Remove everything the record lists; return what was removed. Idempotent."""
    res = record.data["resources"]
    done: list[str] = []
    # 1. Processes: recorded daemons, then anything still inside our namespaces.
    for r in res:
        if r["kind"] == "pid" and pid_alive(r["pid"], r.get("start")):
            try:
                os.kill(r["pid"], signal.SIGKILL)
                done.append(f"process {r['pid']}")
            except ProcessLookupError:
                pass
    namespaces = [r["name"] for r in res if r["kind"] == "netns"]
    for ns in namespaces:
        for pid in netns_pids(ns):
            try:
                os.kill(pid, signal.SIGKILL)
                done.append(f"process {pid} in {ns}")
            except ProcessLookupError:
                pass
    # 1b. FUSE mounts (lazyfs, for power faults): their daemons are dead by now,
    # so the mounts answer ENOTCONN; a lazy unmount always works.
    for r in reversed(res):
        if r["kind"] == "fuse-mount" and _mounted(r["path"]):
            _quiet(["umount", "-l", r["path"]])
            done.append(f"mount {r['path']}")
    # 2. Host iptables rules (rules inside a namespace die with it).
    for r in reversed(res):
        if r["kind"] == "host-iptables":
            while _quiet(["iptables", "-D", *r["rule"]]) == 0:
                done.append("iptables " + " ".join(r["rule"]))
    # 3. Namespaces (their iptables rules and veth ends go with them), links.
    for ns in namespaces:
        if Path(f"/run/netns/{ns}").exists():
            for _ in range(20):  # processes may take a moment to die
                if _quiet(["ip", "netns", "del", ns]) == 0 or not Path(f"/run/netns/{ns}").exists():
                    break
                time.sleep(0.1)
            done.append(f"netns {ns}")
    for r in reversed(res):
        if r["kind"] == "link" and _quiet(["ip", "link", "show", r["name"]]) == 0:
            _quiet(["ip", "link", "del", r["name"]])
            done.append(f"link {r['name']}")
    # 4. What a backend keeps elsewhere (ssh: daemons, rules and the run folder on
    # hosts that outlive the run): each registered backend's `release_resources`, if it has one.
    from harness import registry

    for name in registry.names(registry.BACKENDS):
        try:
            release_backend = getattr(registry.backend(name), "release_resources", None)
        except registry.RegistryError:
            continue
        if release_backend is not None:
            done += release_backend(res)
    # 5. Scratch directories.
    for r in res:
        if r["kind"] == "dir" and os.path.isdir(r["path"]):
            shutil.rmtree(r["path"], ignore_errors=True)
            done.append(f"dir {r['path']}")
    return done


def records(run_dir: Path | None = None) -> list[RunRecord]:
    d = Path(run_dir or RUN_DIR)
    out = []
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            out.append(RunRecord.load(p))
        except (OSError, ValueError):
            continue
    return out


OWNER_EXIT_WAIT = 30.0  # seconds to wait for a dying run's harness to be gone


def cleanup(run_id: str | None = None, include_live: bool = False, run_dir: Path | None = None,
            say=lambda line: None, owner_wait: float = OWNER_EXIT_WAIT) -> list[str]:
    """Release the resources of crashed runs (or one run, or all with include_live).

    A run whose harness is still exiting (SIGKILLed a moment ago) is waited
    for, and `say` is told so; releasing under a harness that still runs could
    race with it, and skipping it would leave the run behind.
    """
    removed: list[str] = []
    for rec in records(run_dir):
        if run_id is not None and rec.run_id != run_id:
            continue
        explicit = include_live or run_id is not None
        state = rec.owner_state()
        if state == "dying":
            pid = rec.data["pid"]
            say(f"cleanup: run {rec.run_id}: its harness (pid {pid}) is exiting; waiting for it")
            if not wait_gone(pid, rec.data.get("pid_start"), owner_wait) and not explicit:
                say(f"cleanup: run {rec.run_id}: its harness (pid {pid}) still exiting after "
                    f"{owner_wait:g} s; skipped")
                continue
        elif state == "alive" and not explicit:
            continue
        # Re-read: a run killed while writing its record may have added to it.
        try:
            rec = RunRecord.load(rec.path)
        except (OSError, ValueError):
            pass
        removed += release(rec)
        rec.remove_file()
    return removed

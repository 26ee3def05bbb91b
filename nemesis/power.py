"""Fault `power`: a power failure of nodes. The process is killed and every
write it did not fsync is lost (lazyfs, mounted under the system's data
directory before the system starts, drops its unsynced pages and undoes
its uncommitted names); its stop (`power-on`) starts the nodes again.

All victims are killed before any drop, so a coordinated failure (all
nodes) leaves no survivor that could re-replicate lost data. Random
schedule: targets as kill (one, minority, majority, all, leader); the
victims come back one by one, a random gap apart. Scenario steps:
`power: [A, B]`, `power-on: [A, B]` (also `restart:`; the final phase
restarts whatever is still down).
"""
from __future__ import annotations

import os
import stat
import weakref
from dataclasses import dataclass

from harness.sut import DATA_FILES, PROCESS, require
from nemesis.fault import (FaultArgError, FaultKind, NodesRequest, Target, choose_nodes, kill_and_wait,
                           parse_nodes, restart_down)
from nemesis.lazyfs.mounts import FIX, LazyFsError, LazyFsMounts, unmount_script

_MOUNTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # db -> LazyFsMounts


class FaultUnavailable(RuntimeError):
    """This fault cannot run here; one line naming fault, host and fix."""


def fuse_device(path: str) -> bool:
    """A FUSE character device (10, 229) is there."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (10, 229)


def preflight(backend: str, capabilities) -> None:
    """Before any host exists: what can be checked from the harness machine."""
    capabilities.require(DATA_FILES, "fault power")
    if backend in ("netns", "docker") and not fuse_device("/dev/fuse"):
        raise FaultUnavailable(f"fault power: this machine ({backend} backend) has no /dev/fuse; {FIX}")
    if backend == "netns":
        try:
            import mfusepy  # noqa: F401  (loads libfuse3)
        except (ImportError, OSError) as e:
            raise FaultUnavailable(f"fault power: libfuse3 or mfusepy is not loadable on this machine ({e}); "
                                   f"{FIX}; run scripts/setup.sh") from None


def prepare(env) -> None:
    """Before the system starts: lazyfs under every data node's data directory."""
    cluster = env.cluster or env.db.cluster
    mounts = LazyFsMounts(cluster, getattr(cluster, "record", None), env.log)
    _MOUNTS[env.db] = mounts
    for node in env.plan.nodes:
        mounts.check_host(node)
    for node in env.plan.nodes:
        mounts.mount(node, env.db.data_dir(node))


def release(env) -> None:
    """After the system stopped: write out what each layer still holds, then
    unmount (the backing folders stay for collection).

    The end of a run stops the servers cleanly; that is no power failure, so
    what they wrote before stopping must reach the dumps, which read the
    backing folders: each layer's unsynced pages and names are made durable
    first (`sync`). A node that lost power earlier lost what its drop took
    then; only what it wrote after its restart is written out here."""
    mounts = _MOUNTS.pop(env.db, None)
    if mounts is None:
        return
    for node in list(mounts.mounts):
        try:
            out = mounts.sync(node)
            env.log(f"power: {node}: wrote out {out.get('synced_files')} files and {out.get('committed')} "
                    f"names the stopped server left unsynced")
        except Exception as e:  # never stops the teardown; the unmount still runs
            env.log(f"power: {node}: could not write out the unsynced data ({type(e).__name__}: {e})")
    mounts.unmount_all()


@dataclass
class PowerArgs(NodesRequest):
    """`power: [A, B]` or `power: {nodes: [A, B], keep_names: true}` (lose data
    only, as Jepsen's LazyFS; by default new names not yet made durable by a
    directory fsync are lost too, as POSIX allows)."""

    keep_names: bool = False

    def resolve(self, node, plan) -> Target:
        return Target([node(r) for r in self.names], detail={"keep_names": self.keep_names})


def parse_start(arg) -> PowerArgs:
    if isinstance(arg, dict):
        extra = set(arg) - {"nodes", "keep_names"}
        if extra or "nodes" not in arg or not isinstance(arg.get("keep_names", False), bool):
            raise FaultArgError("takes nodes, or {nodes: [A, B], keep_names: true|false}")
        return PowerArgs(parse_nodes(arg["nodes"], "power").names, arg.get("keep_names", False))
    return PowerArgs(parse_nodes(arg, "power").names)


class Power:
    def __init__(self, env):
        self.process = require(env.db, PROCESS, "fault power")
        self.mounts = _MOUNTS.get(env.db)
        if self.mounts is None:
            raise LazyFsError("fault power: no lazyfs mounts (the runner must call the fault's prepare "
                              "hook before the system starts)")
        self.stagger = env.interval / 2
        self.log = env.log
        self.victims: list[str] = []

    def choose(self, rng, view):
        return choose_nodes(POWER, rng, view)

    def aim(self, rng, plan, nodes):
        """The targeted schedule's target: these nodes (nemesis.targeted)."""
        return Target(list(nodes), spec="targeted")

    def start(self, target: Target):
        keep_names = bool((target.detail or {}).get("keep_names"))
        kill_and_wait(self.process, target.nodes)   # all down before any drop: no survivor re-replicates
        lost = {}
        for n in target.nodes:
            out = self.mounts.drop(n, keep_names)
            lost[n] = out.get("dropped_bytes", 0)
            self.log(f"power {n}: lost {out.get('dropped_bytes')} unsynced bytes in {out.get('files')} files, "
                     f"undid {out.get('undone')} namespace changes {out.get('undone_first') or ''}")
        self.victims += [n for n in target.nodes if n not in self.victims]
        return {"nodes": list(target.nodes), "keep_names": True} if keep_names else list(target.nodes)

    def stop(self, target, rng, record):
        self.victims = restart_down(self.process, self.victims, target, rng, self.stagger, record, POWER.stop)

    def heal(self) -> None:
        self.victims = []   # the runner restarts every process that is down


POWER = FaultKind(name="power", start="power", stop="power-on", stop_step="power-on", colour="#ff7f0e",
                  needs=(PROCESS, DATA_FILES), make=Power, parse_start=parse_start,
                  preflight=preflight, prepare=prepare, release=release, host_cleanup=unmount_script,
                  extra={"backend_options": {"fuse": True}},   # docker: /dev/fuse and CAP_SYS_ADMIN
                  description="power failure: kill and lose every unsynced write (lazyfs) on one, a minority, "
                              "a majority, all nodes or a leader; power-on restarts them")

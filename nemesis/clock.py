"""Fault `clock`: bump or strobe the wall clock of one node's process with
Debian's libfaketime (LD_PRELOAD, per process), for systems whose process
reads time through the C library and that declare the `clock` capability
(the replica does; NATS does not: Go reads time through the vDSO).

Each data node's process starts (prepare hook, before the system starts)
with libfaketime preloaded, reading its offset from a file that the fault
rewrites (`+0` normally; re-read every second). Only the wall clock moves:
FAKETIME_DONT_FAKE_MONOTONIC=1, so timers, timeouts and asyncio are
untouched, as when an NTP step or an operator moves a machine's clock.
(libfaketime 0.9.10 then fails `clock_nanosleep`, i.e. Python's
`time.sleep`; the replica never calls it.)

Random schedule: one node or the leader; a bump of +-1..300 s, or a strobe
(the offset flips between 0 and delta every second for the hold time).
Scenario steps: `clock: {node: A, bump_s: 60}`,
`clock: {node: A, strobe: {delta_s: 30, period_s: 1, duration_s: 10}}`,
`clock-reset: A` (also the final phase).
"""
from __future__ import annotations

import posixpath
import shlex
import threading
import weakref

from pydantic import BaseModel, ConfigDict, model_validator

from harness.sut import CLOCK
from nemesis.fault import LEADER, ONE, FaultKind, Target, parse_model, parse_nodes, pick

LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1")
FIX = "install libfaketime (apt-get install libfaketime)"
_FILES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # db -> {node: (remote, path)}


class ClockUnavailable(RuntimeError):
    """One line naming fault, host and fix."""


def preflight(backend: str, capabilities) -> None:
    capabilities.require(CLOCK, "fault clock (the process must read time through the C library)")
    if backend == "netns" and not any(_elf(p) for p in LIBS):
        raise ClockUnavailable(f"fault clock: this machine (netns backend) has no libfaketime; {FIX}")


def _elf(path: str) -> bool:
    """A shared object is there (not loaded: that would fake the harness's own clock)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _lib(remote) -> str:
    out = remote.run(["sh", "-c", "for f in " + " ".join(LIBS) + "; do [ -s $f ] && echo $f && break; done; true"],
                     check=False)
    lib = out.stdout.strip()
    if not lib:
        raise ClockUnavailable(f"fault clock: host {remote.name} has no libfaketime; {FIX}")
    return lib


def _write(remote, path: str, spec: str) -> None:
    q = shlex.quote(path)
    remote.run(["sh", "-c", f"printf '%s\\n' {shlex.quote(spec)} > {q}.tmp && mv {q}.tmp {q}"])


def prepare(env) -> None:
    """Before the system starts: libfaketime in every data node's process, offset 0."""
    files = {}
    for node in env.plan.nodes:
        remote = env.remotes[node]
        lib = _lib(remote)
        path = posixpath.join(posixpath.dirname(env.db.data_dir(node).rstrip("/")), "faketime.rc")
        remote.run(["mkdir", "-p", posixpath.dirname(path)])
        _write(remote, path, "+0")
        env.db.set_env(node, {"LD_PRELOAD": lib, "FAKETIME_TIMESTAMP_FILE": path, "FAKETIME_CACHE_DURATION": "1",
                              "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
        files[node] = (remote, path)
    _FILES[env.db] = files


def release(env) -> None:
    _FILES.pop(env.db, None)


class StrobeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    delta_s: float
    period_s: float = 1.0
    duration_s: float = 10.0

    @model_validator(mode="after")
    def _check(self):
        if self.period_s < 1:
            raise ValueError("period_s must be >= 1 (libfaketime re-reads its offset once a second)")
        return self


class ClockArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node: str | list[str]
    bump_s: float | None = None
    strobe: StrobeArgs | None = None

    @model_validator(mode="after")
    def _check(self):
        if (self.bump_s is None) == (self.strobe is None):
            raise ValueError("give bump_s or strobe (one of them)")
        return self

    def refs(self) -> list[str]:
        return [self.node] if isinstance(self.node, str) else list(self.node)

    def resolve(self, node, plan) -> Target:
        return Target([node(r) for r in self.refs()], detail=self.model_dump(exclude={"node"}))


def parse_start(arg) -> ClockArgs:
    return parse_model(ClockArgs, arg)


def parse_stop(arg):
    return None if arg in (None, {}, True, "all") else parse_nodes(arg, "clock-reset")


def _spec(offset: float) -> str:
    return f"{offset:+g}"


class Clock:
    def __init__(self, env):
        self.files = _FILES.get(env.db)
        if self.files is None:
            raise ClockUnavailable("fault clock: libfaketime was not set up (the runner must call the "
                                   "fault's prepare hook before the system starts)")
        self.interval = env.interval
        self.log = env.log
        self.skewed: set[str] = set()
        self._stop = threading.Event()
        self._strobes: list[threading.Thread] = []

    def choose(self, rng, view):
        nodes = pick(rng.choice([ONE, ONE, LEADER]), view.plan.nodes, rng, view.leader)
        if rng.random() < 0.6:
            detail = {"bump_s": rng.choice([-1, 1]) * rng.randint(1, 300), "strobe": None}
        else:
            detail = {"bump_s": None, "strobe": {"delta_s": rng.randint(1, 60), "period_s": 1.0,
                                                 "duration_s": self.interval}}
        return Target(nodes, detail=detail, spec="clock")

    def start(self, target: Target):
        d = target.detail or {}
        for n in target.nodes:
            remote, path = self.files[n]
            if d.get("bump_s") is not None:
                _write(remote, path, _spec(d["bump_s"]))
            else:
                self._strobe(remote, path, d["strobe"])
            self.skewed.add(n)
        return {"nodes": list(target.nodes), **{k: v for k, v in d.items() if v is not None}}

    def _strobe(self, remote, path: str, s: dict) -> None:
        self._stop.clear()

        def run():
            on, left = False, s["duration_s"]
            while left > 0 and not self._stop.wait(min(s["period_s"], left)):
                on = not on
                _write(remote, path, _spec(s["delta_s"] if on else 0))
                left -= s["period_s"]
            _write(remote, path, "+0")

        t = threading.Thread(target=run, name="clock-strobe", daemon=True)
        t.start()
        self._strobes.append(t)

    def _reset(self, nodes) -> list[str]:
        self._stop.set()
        for t in self._strobes:
            t.join(5)
        self._strobes = []
        for n in nodes:
            remote, path = self.files[n]
            _write(remote, path, "+0")
        self.skewed -= set(nodes)
        return list(nodes)

    def stop(self, target, rng, record):
        nodes = sorted(self.skewed) if target is None else list(target.nodes)
        record(CLOCK_FAULT.stop, self._reset(nodes))

    def heal(self) -> None:
        self._reset(sorted(self.files))


CLOCK_FAULT = FaultKind(name="clock", start="clock", stop="clock-reset", stop_step="clock-reset",
                        colour="#8c564b", needs=(CLOCK,), make=Clock, targets=(ONE, ONE, LEADER),
                        parse_start=parse_start, parse_stop=parse_stop,
                        preflight=preflight, prepare=prepare, release=release,
                        description="bump or strobe one node's wall clock (libfaketime); clock-reset puts it back")

"""What a fault is, for the random schedule and for scenario scripts alike.

A fault is one module plus one registration (entry-point group
`replog.faults`, pyproject.toml) of a `FaultKind`: its name, the history op
names of its start and stop, its colour in the reports, the capabilities of
the system it needs, how the random schedule picks its targets, how a
scenario step's argument is read, and `make(env) -> Fault` for one run.

The same `Fault` object is driven by the random schedule (`choose` a target,
`start`, later `stop(None)`) and by scenario steps (`start(target)` /
`stop(target)` with nodes the script named); `nemesis.nemesis.Nemesis` is
the one place that calls them and writes the nemesis ops to the history.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from harness.sut import DB, HostPlan

# Target specs (Jepsen's node specs): which nodes a random fault hits.
ONE, MINORITY, MAJORITY, ALL, LEADER = "one", "minority", "majority", "all", "leader"
DEFAULT_TARGETS = (ONE, ONE, MINORITY, MAJORITY, ALL, LEADER)  # one twice: drawn more often


class FaultArgError(ValueError):
    """A scenario step's argument this fault cannot read; one line."""


@dataclass
class Target:
    """Where a fault acts: resolved node names, plus what else the fault needs
    (a partition's grudge graph, a clock offset, a file pattern)."""

    nodes: list[str]
    detail: Any = None
    spec: str = "scripted"   # how it was chosen: one | minority | ... | scripted
    why: dict | None = None  # targeted schedule: the moment and the state that picked it (history `why`)


@dataclass
class View:
    """What the random schedule knows when it picks a target."""

    plan: HostPlan
    leader: str | None = None   # leader of a random key, if the system can tell


@dataclass
class FaultEnv:
    """What a fault gets for one run."""

    db: DB
    remotes: dict                 # host -> harness.cluster.base.Remote
    plan: HostPlan
    interval: float = 10.0        # the schedule's interval (random restarts are staggered over half of it)
    log: Callable[[str], None] = lambda m: None
    cluster: Any = None           # harness.cluster.base.Cluster (layout, record) for faults that install things


class Request(Protocol):
    """A scenario step's parsed argument: node references, resolved when the step runs."""

    def refs(self) -> list[str]: ...

    def resolve(self, node: Callable[[str], str], plan: HostPlan) -> Target: ...


@dataclass
class NodesRequest:
    """The usual step argument: a node reference or a list of them."""

    names: list[str]

    def refs(self) -> list[str]:
        return list(self.names)

    def resolve(self, node, plan) -> Target:
        return Target([node(r) for r in self.names])


def parse_nodes(arg: Any, step: str) -> NodesRequest:
    refs = [arg] if isinstance(arg, str) else arg
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
        raise FaultArgError(f"takes a node or a list of nodes, e.g. {step}: leader of key 0")
    return NodesRequest(refs)


class Fault(Protocol):
    """One fault kind on one run's cluster. Its methods block (they run in a thread)."""

    def choose(self, rng: random.Random, view: View) -> Target:
        """The random schedule's target."""

    def start(self, target: Target) -> Any:
        """Apply the fault; -> the value of the history's start op."""

    def stop(self, target: Target | None, rng: random.Random, record: Callable[[str, Any], None]) -> None:
        """Undo it on target's nodes (None: everything this fault did), writing
        its stop op(s) with record(f, value)."""

    def heal(self) -> None:
        """The final phase: undo everything at once, record nothing (the runner
        then resumes and restarts every process and writes the `final` op)."""


@dataclass(frozen=True)
class FaultKind:
    """A registered fault (`replog.faults`)."""

    name: str                                  # --nemesis name and scenario start step
    start: str                                 # history f of the start op
    stop: str                                  # history f of the stop op
    colour: str                                # report shading (CSS colour)
    make: Callable[[FaultEnv], Fault]
    description: str = ""
    needs: tuple[str, ...] = ()                # capabilities of the system (harness.sut)
    targets: tuple[str, ...] = DEFAULT_TARGETS
    stop_step: str | None = None               # scenario step that stops it (default: `stop`)
    parse_start: Callable[[Any], Request] | None = None   # step argument -> Request (default: nodes)
    parse_stop: Callable[[Any], Request | None] | None = None
    # Hooks of faults that change the hosts, called by the runner for the faults a run may use:
    preflight: Callable[[str, Any], None] | None = None   # (backend, harness.sut.Capabilities of the run), before any host exists
    prepare: Callable[[FaultEnv], None] | None = None     # before the system starts (mount, LD_PRELOAD)
    release: Callable[[FaultEnv], None] | None = None     # after the system stopped (unmount)
    host_cleanup: Callable[[str], str] | None = None      # shell removing its state under a run folder
    # Destroys a copy of the data (a replaced disk): the random schedule starts it only once every
    # key's ISR holds all its replicas (nemesis.schedule), as operators replace one disk at a time.
    in_sync_first: bool = False
    extra: dict = field(default_factory=dict)  # anything else a fault wants to declare

    @property
    def stop_step_name(self) -> str:
        return self.stop_step or self.stop

    def parse(self, arg: Any, stopping: bool) -> Request | None:
        """A scenario step's argument (FaultArgError, one line)."""
        parser = self.parse_stop if stopping else self.parse_start
        if parser is not None:
            return parser(arg)
        return parse_nodes(arg, self.stop_step_name if stopping else self.name)


def pick(spec: str, nodes: list[str], rng: random.Random, leader: str | None) -> list[str]:
    """Nodes for a target spec: one, minority, majority, all, leader (falls back to one)."""
    n = len(nodes)
    if spec == LEADER and leader:
        return [leader]
    size = {ONE: 1, MINORITY: max(1, (n - 1) // 2), MAJORITY: n // 2 + 1, ALL: n}.get(spec, 1)
    return sorted(rng.sample(nodes, size))


def choose_nodes(kind: FaultKind, rng: random.Random, view: View) -> Target:
    """The usual random choice: a target spec of the kind, then data nodes for it;
    a role host the system lists in `fault_roles` (the replica's tiered store) is
    one more spec, as likely as each of the others."""
    extra = view.plan.fault_hosts
    specs = list(kind.targets) + (["role"] if extra else [])
    spec = rng.choice(specs)
    if spec == "role":
        return Target([rng.choice(extra)], spec="role")
    return Target(pick(spec, view.plan.nodes, rng, view.leader), spec=spec)


def parse_model(model, arg: Any):
    """A scenario step's argument read by a pydantic model; a bad one is FaultArgError, one line."""
    from pydantic import ValidationError

    try:
        return model.model_validate(arg)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        raise FaultArgError(f"{loc}: {msg}" if loc else msg) from None


def kill_and_wait(process, nodes: list[str], timeout: float = 5.0) -> None:
    """SIGKILL the nodes' processes and wait until none runs (faults that act on a stopped process)."""
    import time

    for n in nodes:
        process.kill(n)
    deadline = time.monotonic() + timeout
    while any(process.running(n) for n in nodes) and time.monotonic() < deadline:
        time.sleep(0.02)


def restart_down(process, victims: list[str], target, rng: random.Random, stagger: float, record,
                 op: str) -> list[str]:
    """The stop of faults that leave nodes down (power, disk-loss): the random schedule's
    (target None) restarts every victim still down, staggered; a scripted one restarts the
    target's nodes that are down, now. -> the victims left."""
    if target is None:
        restart_staggered(process, victims, rng, stagger, record, op)
        return []
    started = [n for n in target.nodes if not process.running(n)]
    for n in started:
        process.start(n)
    record(op, started)
    return [n for n in victims if n not in target.nodes]


def restart_staggered(process, victims: list[str], rng: random.Random, stagger: float, record, op: str) -> None:
    """The random schedule's stop of kill-like faults: the victims still down come back one
    by one in random order, a random gap (up to `stagger`) apart, one `op` each."""
    import time

    for i, n in enumerate(rng.sample(victims, len(victims))):
        if i and stagger:
            time.sleep(rng.uniform(0.2, 1.0) * stagger)
        if not process.running(n):
            process.start(n)
            record(op, [n])

"""The seam between the harness and a system under test (Jepsen's `db` and
`client`). The runner, the nemesis, the workloads, the scenarios and the
checkers see only what is declared here; a system (the replica, NATS
JetStream, ...) is one adapter package `systems/<name>/` whose `SYSTEM` is a
`System` (harness/registry.py finds it; other packages use the entry-point
group `replog.systems`). A system supports a fault when the fault's `needs`
are among its capabilities.

Capabilities beyond starting and stopping depend on a run's configuration (its
settings and system options: tiered storage on or off, NATS's memory storage)
and are computed in one place per system, `System.capabilities_for(settings,
options) -> {capability: None, or why the system lacks it}`;
`System.capabilities_in(settings, options)` wraps that as `Capabilities`
(`has`, `require`, `require_fault`), and `capabilities_of(db)` is a set-up
run's. The capabilities are handed out as separate objects (`DB.process`,
`DB.pausable`, `DB.inspector`, `DB.remote_tier`); a caller that needs one asks
with `require()` and gets a one-line `Unsupported` naming the system, the
capability and the reason, before any host exists when it is asked at
validation time.

Every method the generic code calls on a system's objects is declared in a
Protocol below; a system declares the classes of its objects (`Parts`), and
registering it checks them against the Protocols (harness.registry.verify, as
pluggy checks a hook implementation against its spec): a missing or misnamed
method is a one-line refusal naming it.

Node names: data nodes are `n1..nN` (fault targets, key replicas); a system
may add role hosts (the replica's controller `ctl`, a remote store host).
Keys are integers 0..K-1 (the replica: partitions of topic `log`; NATS: one
stream subject per key). Every name below that says "node" means a host name.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

# "Cluster" in annotations below is harness.cluster.base.Cluster (a higher layer: not imported).

# -- capabilities ------------------------------------------------------------
PROCESS = "process"          # DB.process: start / kill / running per node
PAUSE = "pause"              # DB.pausable: SIGSTOP / SIGCONT per node
INSPECT = "inspect"          # DB.inspector.metadata / state: normalised samples
DUMP = "dump"                # DB.inspector.dump: every record of a node's replica of every key
CHECKPOINTS = "checkpoints"  # DB.inspector.checkpoints: persisted HW per key of a node
EVENTS = "events"            # DB.inspector.events: truncations / ISR changes from collected logs
CLOCK = "clock"              # DB.set_env works for LD_PRELOAD (libfaketime) on the next start
DATA_FILES = "data-files"    # DB.data_dir / data_files name the node's on-disk state
OFFSETS = "offsets"          # Inspector.state's leo / hw / log_start are the replica's own (scenario conditions)
META_GROUP = "meta-group"    # DB.inspector.meta_group (the MetaGroup protocol): scenario roles `the metadata leader`
REMOTE_TIER = "remote-tier"  # DB.remote_tier: tiered storage's remote objects (None while tiered storage is off)
# DB.queue_client(request_timeout, name, group, txn) -> QueueClient: transactional producers and consumer
# groups (the `queue` workload, workloads/queue.py); `name` is unique per process (a transactional id).
# DB.transaction_coordinator(transactional_id) (optional, async) -> (node | None, why dict): the node
#   coordinating that id's transactions (the targeted nemesis's late-commit-coordinator play).
# DB.client_info() (optional) -> dict: the client library the queue clients are (`client`, `version`) and
# what it negotiated with the cluster (`transaction_protocol`), as far as the library says; the queue
# workload records it in its final reads (history), results.json and the report show it.
TRANSACTIONS = "transactions"
WIPE = "wipe"                # DB.wipe: a stopped node's disk replaced by an empty one, prepared as the system needs
MEMBERSHIP = "membership"    # DB.membership: move a key's replicas to other nodes (and unregister a stopped node)
CAPABILITIES = (PROCESS, PAUSE, INSPECT, DUMP, CHECKPOINTS, EVENTS, CLOCK, DATA_FILES, OFFSETS, META_GROUP,
                REMOTE_TIER, TRANSACTIONS, WIPE, MEMBERSHIP)


class Unsupported(RuntimeError):
    """The system under test lacks what was asked of it; one line that names
    the system, the capability (or fault) and what to do instead."""

    def __init__(self, system: str, capability: str, needed_for: str = "", reason: str = ""):
        self.system, self.capability = system, capability
        why = f" (needed for {needed_for})" if needed_for else ""
        because = f": {reason}" if reason else ""
        super().__init__(f"system {system!r} does not support {capability!r}{why}{because}; "
                         f"pick another system or leave that out")


class Capabilities(Mapping):
    """What one system can do in one configuration (a run's settings and system
    options): capability -> None (it can) or the one-line reason it cannot, which
    the refusals quote ("" when the system gives none). Every capability of
    CAPABILITIES is a key. Made by `System.capabilities_in`; a run's is
    `capabilities_of(db)`."""

    def __init__(self, system: str, reasons: Mapping[str, str | None]):
        self.system = system
        self._reasons = {c: "" for c in CAPABILITIES} | dict(reasons)

    def __getitem__(self, capability: str) -> str | None:
        return self._reasons[capability]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reasons)

    def __len__(self) -> int:
        return len(self._reasons)

    def __repr__(self) -> str:
        return f"Capabilities({self.system!r}, {sorted(self.available)})"

    @property
    def available(self) -> frozenset[str]:
        return frozenset(c for c, why in self._reasons.items() if why is None)

    def has(self, capability: str) -> bool:
        return self._reasons.get(capability, "") is None

    def require(self, capability: str, needed_for: str = "") -> None:
        if not self.has(capability):
            raise Unsupported(self.system, capability, needed_for, self._reasons.get(capability) or "")

    def supports(self, fault) -> bool:
        """Whether a fault (a nemesis.fault.FaultKind: name, needs) can run: it has every capability it needs."""
        return all(self.has(need) for need in fault.needs)

    def require_fault(self, fault) -> None:
        """Unsupported (one line, naming the missing capability's reason) unless `supports(fault)`."""
        lacking = [need for need in fault.needs if not self.has(need)]
        if lacking:
            reason = self._reasons.get(lacking[0]) or f"it lacks the capability {lacking[0]!r} that this fault needs"
            raise Unsupported(self.system, f"fault {fault.name}", "the nemesis", reason)


# -- client errors (the history's fail / info) -------------------------------
class ClientError(Exception):
    """A client operation did not succeed."""


class DefiniteError(ClientError):
    """The operation certainly did not take effect: the history records `fail`."""


class IndefiniteError(ClientError):
    """The operation may have taken effect: the history records `info`, and the
    process is not reused (Jepsen's rule)."""


class Fenced(DefiniteError):
    """The operation did not take effect and this client cannot go on (a transactional
    producer another one fenced, or that its coordinator timed out): `fail`, and the
    process retires (a new process gets a new client)."""


class AbsentError(DefiniteError):
    """The system answered definitively that the key's log does not exist
    (NATS: stream not found, JetStream error 10059; Kafka and the replica:
    UNKNOWN_TOPIC_OR_PARTITION). Not a timeout, not "no leader", not a refused
    connection: those are plain errors. Every system's client raises this for
    that answer and nothing else; the final phase of a run (workloads/log.py)
    takes a key whose log stays absent while the cluster is healthy as gone:
    every acknowledged send to it is lost (the `absent` column of the flat end rows, checkers/log_anomalies.py)."""


# -- normalised state --------------------------------------------------------
@dataclass(frozen=True)
class KeyMeta:
    """What the system's authority (controller, meta leader) says about a key."""

    leader: str | None                 # node name, None while there is no leader
    epoch: int | None = None           # leader epoch / term; grows with each election
    replicas: tuple[str, ...] = ()     # assigned replicas, in assignment order
    isr: tuple[str, ...] = ()          # in-sync (Kafka) / current (Raft) replicas
    view: str | None = None            # whose answer this is, where the system asks several nodes

    def as_json(self) -> dict:
        out = {"leader": self.leader, "leader_epoch": self.epoch,
               "replicas": list(self.replicas), "isr": list(self.isr)}
        if self.view is not None:
            out["view_from"] = self.view
        return out


@dataclass(frozen=True)
class ReplicaState:
    """What one node says about its replica of one key; None = not known."""

    key: int
    role: str = "none"                 # leader | follower | none
    leader: str | None = None          # node it believes leads
    epoch: int | None = None
    leo: int | None = None             # log end offset
    hw: int | None = None              # high watermark / commit index
    log_start: int | None = None
    isr: tuple[str, ...] = ()          # as the leader sees it
    local_log_start: int | None = None  # tiered storage: first offset held locally
    remote_end: int | None = None       # tiered storage: one past the last remote offset (-1: none)
    view: str | None = None             # whose answer leader/epoch/isr are, where several nodes were asked

    def as_json(self) -> dict:
        """One entry of a samples.jsonl line's `state.partitions` (docs/interfaces.md)."""
        out = {"partition": self.key, "role": self.role, "leader": self.leader,
               "leader_epoch": self.epoch, "leo": self.leo, "hw": self.hw,
               "log_start": self.log_start, "isr": list(self.isr)}
        if self.local_log_start is not None:
            out.update(local_log_start=self.local_log_start, remote_end=self.remote_end)
        if self.view is not None:
            out["view_from"] = self.view
        return out


# -- the client of the log workload -------------------------------------------
@runtime_checkable
class LogClient(Protocol):
    """An asyncio client of a replicated log with integer keys. Errors are
    `DefiniteError` or `IndefiniteError`; anything else counts as indefinite."""

    async def create(self, keys: int, replication_factor: int, config: dict) -> None:
        """Create the log (topic / stream) with keys 0..keys-1; idempotent."""

    async def metadata(self) -> dict[int, KeyMeta]:
        """The authority's view of every key."""

    async def send(self, key: int, value: Any, acks: str = "all") -> int:
        """Append value to key; -> its offset. `acks` is 0 | 1 | all where the system has it."""

    async def poll(self, key: int, offset: int, max_records: int = 1000) -> list[tuple[int, Any]]:
        """Committed records of key from offset on: [(offset, value)]."""

    async def end_offset(self, key: int) -> int:
        """One past the last record of key a consumer can read."""

    async def close(self) -> None: ...


# -- the client of the queue workload (TRANSACTIONS) ---------------------------
@runtime_checkable
class QueueClient(Protocol):
    """One process's producer and consumer for the `queue` workload (Jepsen's queue
    ops, workloads/queue.py); blocking work runs off the event loop. Errors:
    DefiniteError (`fail`: nothing took effect; the consumer is back at its committed
    position), Fenced (`fail`, and the process retires), IndefiniteError or anything
    else (`info`: a commit whose outcome is unknown; the process retires).
    Optional attribute `transaction_producer`: the last txn's producer identity as the
    client library knows it ({"id", "epoch", "end_epoch"}; None where it does not say),
    recorded in the txn's completion as `producer`."""

    async def ready(self, timeout: float) -> None:
        """Wait until the system serves transactions and consumer groups (a transaction
        coordinator and a group coordinator answer); TimeoutError (one line) if not."""

    async def subscribe(self, keys: list[int]) -> None:
        """Join the run's consumer group for these keys; the group assigns them."""

    async def assign(self, keys: list[int]) -> None:
        """Consume these keys, from the group's committed positions (no membership)."""

    async def txn(self, mops: list[list], abort: bool = False, abort_after: float | None = None) -> list[list]:
        """One transaction of micro-ops ["send", key, value] / ["poll"], the polled
        positions committed inside it -> the completed micro-ops ["send", key, [offset,
        value]] / ["poll", {key: [[offset, value], ...]}]. `abort`: abort it on purpose at
        the end (DefiniteError, with the completed micro-ops in `.completed`). `abort_after`
        (s): the application waits that long for a send's acknowledgement and, without one,
        aborts while the send is in flight (DefiniteError once the abort succeeded)."""

    async def send(self, key: int, value: Any) -> int:
        """One send outside a transaction -> its offset."""

    async def poll(self) -> dict[int, list[tuple[int, Any]]]:
        """One poll outside a transaction (the positions committed after it)."""

    def rebalances(self) -> list[tuple[str, list[int]]]:
        """What the group did since the last call, in order: ("revoke", keys kept) and
        ("assign", keys now held); a subscribed consumer's only."""

    async def committed_reads(self, key: int, offset: int) -> tuple[list[tuple[int, Any]], bool]:
        """Committed records of key from offset on (read_committed), and whether the
        read reached the end of what is committed (the final reads)."""

    async def stable(self, key: int) -> bool:
        """No transaction is open on key: everything in its log is committed or aborted."""

    async def close(self) -> None: ...


@runtime_checkable
class Transactional(Protocol):
    """TRANSACTIONS: a DB that hands out queue clients."""

    def queue_client(self, request_timeout: float, name: str, group: str, txn: bool = True) -> QueueClient:
        """One process's client: `name` unique per process (a transactional id), `group` the run's
        consumer group, `txn` False for a plain producer."""


# -- capabilities -------------------------------------------------------------
@runtime_checkable
class Process(Protocol):
    """The system's process on a node (blocking calls; run them in a thread)."""

    def start(self, node: str) -> None:
        """Start the node's process (with the environment `DB.set_env` gave it)."""

    def kill(self, node: str) -> None:
        """SIGKILL; a no-op if it is not running."""

    def running(self, node: str) -> bool: ...


@runtime_checkable
class Pausable(Protocol):
    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...


@runtime_checkable
class Inspector(Protocol):
    """Looks inside the system, for sampling, scenario conditions and checkers.
    Each method belongs to one capability (INSPECT, DUMP, CHECKPOINTS, EVENTS)."""

    async def state(self, node: str, timeout: float = 0.5) -> dict[int, ReplicaState] | None:
        """INSPECT: the node's replicas by key; None if it does not answer."""

    async def dump(self, node: str) -> dict | None:
        """DUMP: `nodes/<node>/dump.json` (docs/interfaces.md "Dump")."""

    def checkpoints(self, node: str) -> dict[int, int]:
        """CHECKPOINTS: the HW per key the node last persisted ({} if none yet)."""

    def events(self, node_dir: Path, node: str) -> list[dict]:
        """EVENTS: from the logs collected into node_dir, time-ordered dicts
        {"time": ISO-8601 wall time, "node", "key", "event": "truncate" | "isr-shrink" | "isr-expand", ...}
        (truncate: from, to; isr-shrink: isr, out; isr-expand: isr, replica, leo, hw)."""

    async def more_dumps(self) -> dict[str, dict]:
        """DUMP: copies of the log besides the data nodes' (a remote tier's segments), by the
        name they take among the dumps; {} when there are none."""

    async def close(self) -> None:
        """Release what the inspector holds (connections); the run calls it once, at the end."""


@runtime_checkable
class MetaGroup(Protocol):
    """META_GROUP: an inspector that can name the group holding the cluster's metadata."""

    async def meta_group(self, nodes: list[str]) -> dict | None:
        """{"leader": node | None, "members": [nodes], "views": {node: the leader it names,
        "" for none, None if it did not answer}} as the nodes report it now (NATS's
        JetStream meta group); None: no node answers."""


@runtime_checkable
class RemoteTier(Protocol):
    """REMOTE_TIER: the remote store of tiered storage (KIP-405) as the remote-store
    fault sees it. Blocking calls; they act on the store itself (its files), never
    through the system, so they work while the store is unavailable."""

    def segments(self) -> list[dict]:
        """The remote segments stored now: {"key", "base", "name"} by key and base
        (a segment copied twice, by two leaders, is listed twice)."""

    def lose(self, segment: dict) -> dict:
        """Delete every object of one segment -> {"key", "base", "end" (last offset or
        None), "objects": [names removed]}."""

    def set_available(self, available: bool) -> dict:
        """False: every operation on the store fails until True again -> what changed."""

    def set_delay(self, seconds: float) -> dict:
        """Each operation on the store takes about `seconds` longer (0: normal) -> what
        changed; Unsupported (one line) where the system cannot slow its store."""


@runtime_checkable
class Membership(Protocol):
    """MEMBERSHIP: the operators' membership changes (blocking calls; run them in a thread)."""

    def replicas(self) -> dict[int, list[str]]:
        """Every key's assigned replicas (node names) in preference order, as the authority says now."""

    def reassign(self, key: int, nodes: list[str]) -> dict:
        """Move the key's replicas to `nodes` (in this order); returns once the system accepted the
        move (it completes in the background: new replicas catch up, then the old ones go) -> what
        the system answered. A refusal raises RuntimeError (one line)."""

    # optional: def unregister(self, node) -> str   remove a stopped node from the cluster's members
    # (Kafka KRaft's UnregisterBroker); a system without it retires a node by stopping it


@runtime_checkable
class Wipeable(Protocol):
    """WIPE, on the DB itself."""

    def wipe(self, node: str) -> dict:
        """The node's process is down: replace its data directory by an empty one, as a replaced disk
        would be, prepared the way the system needs to start on it (Kafka KRaft: formatted again with
        the run's cluster id); the same node id. -> what was done (the history op's value)."""


# -- the system on a cluster ---------------------------------------------------
@runtime_checkable
class DB(Protocol):
    """A system set up on the hosts of one cluster."""

    system: "System"
    cluster: "Cluster"                 # the hosts it runs on
    nodes: list[str]                   # data nodes n1..nN (fault targets)
    hosts: list[str]                   # every host of the system (nodes + roles)
    settings: dict                     # the run's settings (the system's own names)
    options: "SystemOptions"           # the run's system options
    process: Process | None
    pausable: Pausable | None
    inspector: Inspector | None
    remote_tier: RemoteTier | None     # None while the run has no remote tier

    def setup(self) -> None:
        """Install on every host and start every process (blocking)."""

    def teardown(self) -> None:
        """Stop every process (graceful, then SIGKILL). Idempotent."""

    def startup_problem(self) -> str | None:
        """One line if a process exited while starting (then waiting is pointless)."""

    def client(self, request_timeout: float = 5.0, prefer: str | None = None) -> LogClient:
        """A fresh client; connects to the endpoints lazily. `prefer` names a node
        whose endpoint the client connects through while it answers (a scenario's
        `write: {via: ...}`: e.g. a NATS publish that sits in a paused server's
        socket); a system whose clients always go to the leader may ignore it."""

    def endpoints(self) -> list[tuple[str, int]]:
        """Addresses the clients use (bootstrap)."""

    def data_dir(self, node: str) -> str:
        """The node's on-disk state on its host (the faults layer may mount there
        before setup, e.g. a FUSE layer for power faults)."""

    def data_files(self, node: str) -> list[str]:
        """Globs (on the host) of the files that hold the node's data (corrupt faults)."""

    def set_env(self, node: str, env: dict[str, str]) -> None:
        """Environment added to the node's process from its next start on
        (libfaketime: LD_PRELOAD, FAKETIME); {} removes it."""

    def collect(self, node: str, dest: Path) -> None:
        """Copy the node's logs (and checkpoint files etc.) into dest = store/nodes/<node>/."""


@dataclass(frozen=True)
class HostPlan:
    """The hosts a system needs: data nodes plus named role hosts."""

    nodes: list[str]                                        # n1..nN
    roles: dict[str, str] = field(default_factory=dict)     # role -> host, e.g. {"controller": "ctl"}
    fault_hosts: list[str] = field(default_factory=list)    # role hosts that are fault targets too

    @property
    def hosts(self) -> list[str]:
        return [*self.roles.values(), *self.nodes]


def data_nodes(n: int) -> list[str]:
    return [f"n{i}" for i in range(1, n + 1)]


class SystemOptions(BaseModel):
    """Base of a system's options model (the spec's `system_options`)."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class RunShape:
    """What the spec says about the system's shape (the same for every system)."""

    nodes: int = 3
    keys: int = 3
    replication_factor: int = 3
    settings: dict = field(default_factory=dict)   # the system's own setting names


@dataclass(frozen=True)
class Parts:
    """The classes of a system's objects: registration checks each against its
    Protocol above (harness.registry.verify), and `System.make_db` makes the DB."""

    db: type                          # DB, made as db(cluster, plan, shape, options, system)
    client: type                      # LogClient: what db.client() returns
    process: type | None = None       # Process: db.process (PROCESS)
    pausable: type | None = None      # Pausable: db.pausable (PAUSE)
    inspector: type | None = None     # Inspector (and MetaGroup with META_GROUP): db.inspector
    remote_tier: type | None = None   # RemoteTier: db.remote_tier (REMOTE_TIER)
    queue_client: type | None = None  # QueueClient: what db.queue_client() returns (TRANSACTIONS; the DB is Transactional)
    membership: type | None = None    # Membership: db.membership (MEMBERSHIP; WIPE: the DB is Wipeable)


# Which Parts field hands out each capability's object, and its Protocol (what registration checks).
PART_PROTOCOLS = {"db": DB, "client": LogClient, "process": Process, "pausable": Pausable, "inspector": Inspector,
                  "remote_tier": RemoteTier, "queue_client": QueueClient, "membership": Membership}
PART_OF = {PROCESS: "process", PAUSE: "pausable", INSPECT: "inspector", DUMP: "inspector",
           CHECKPOINTS: "inspector", EVENTS: "inspector", OFFSETS: "inspector", META_GROUP: "inspector",
           REMOTE_TIER: "remote_tier", CLOCK: "db", DATA_FILES: "db", TRANSACTIONS: "queue_client",
           WIPE: "db", MEMBERSHIP: "membership"}


@dataclass(frozen=True)
class System:
    """A registered system under test (entry-point group `replog.systems`)."""

    name: str
    description: str
    options: type[SystemOptions]
    # What the system can do with these settings and options: capability -> None (it can) or the
    # one-line reason it cannot (the refusals quote it). The one place its capabilities are computed;
    # a capability it does not name, it lacks.
    capabilities_for: Callable[[dict, SystemOptions], dict[str, str | None]]
    parts: Callable[[], Parts]                        # its objects' classes (imported when called)
    roles: dict[str, str] = field(default_factory=dict)   # role -> host name added to n1..nN
    # role hosts that depend on the settings (the replica's store host with tiered storage);
    # default: `roles`. Role hosts listed in `fault_roles` are fault targets like data nodes.
    plan_roles: Callable[[dict, SystemOptions | None], dict] | None = None
    fault_roles: tuple[str, ...] = ()
    code: tuple[str, ...] = ()                        # folders (repo-relative) installed on the hosts
    check_settings: Callable[[dict, SystemOptions], None] | None = None  # ValueError, one line
    setting_value: Callable[[str, dict, SystemOptions], float] | None = None  # effective value of a setting
    variant_option: str | None = None                 # the option scenarios expect verdicts per (era)
    variants: tuple[str, ...] = ()                    # its values
    default_settings: Callable[[int], dict] = lambda replication_factor: {}  # settings a spec gets unless set
    # Replication events (leader / follower / truncate / elect / recover dicts) from a store's nodes/ folder,
    # for the report's stories of lost writes; None: the report reads the replica's own log format.
    node_events: Callable[[Path], list[dict]] | None = None
    # "module:function" of `harness scenario NAME --compare`: the system's runs of a scenario
    # beside the default system's model of them (function(name, store_root, runs=, from_store=,
    # subnet=, backend=) -> exit code); None: the system has no comparison.
    compare: str | None = None

    def variant_options(self, variant: str | None) -> dict:
        """system_options that select a variant."""
        return {} if variant is None or self.variant_option is None else {self.variant_option: variant}

    def host_plan(self, nodes: int, options: SystemOptions | None = None, settings: dict | None = None) -> HostPlan:
        roles = self.plan_roles(settings or {}, options) if self.plan_roles is not None else dict(self.roles)
        return HostPlan(data_nodes(nodes), roles, [h for r, h in roles.items() if r in self.fault_roles])

    def capabilities_in(self, settings: dict | None = None,
                        options: SystemOptions | dict | None = None) -> Capabilities:
        """Its capabilities with these settings and options (a dict is parsed; None: the defaults)."""
        if not isinstance(options, SystemOptions):
            options = self.parse_options(options)
        return Capabilities(self.name, self.capabilities_for(dict(settings or {}), options))

    def make_db(self, cluster: "Cluster", plan: HostPlan, shape: RunShape, options: SystemOptions) -> DB:
        return self.parts().db(cluster, plan, shape, options, self)

    def parse_options(self, data: dict | None) -> SystemOptions:
        return self.options.model_validate(data or {})


def capabilities_of(db: DB) -> Capabilities:
    """A set-up run's capabilities: its system's with the run's settings and options."""
    return db.system.capabilities_in(db.settings, db.options)


def require(db: DB, capability: str, needed_for: str = ""):
    """The capability's object of a set-up system (process, pausable, inspector, remote_tier; the DB
    itself for clock, data-files and transactions), or Unsupported."""
    capabilities_of(db).require(capability, needed_for)
    part = PART_OF[capability]
    obj = db if part in ("db", "queue_client") else getattr(db, part)
    if obj is None:
        raise Unsupported(db.system.name, capability, needed_for, "this run hands out no object for it")
    return obj

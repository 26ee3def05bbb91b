"""The targeted mode of the random schedule (`--nemesis-mode targeted`):
each fault's target *and its moment* come from the state the system's
inspector shows right now, instead of being drawn blindly.

The seeded rng draws *plays* (short sequences of moves, `PLAYS`); per move a
fault name, a moment and a hold. The schedule watches the cluster in the
background (Inspector.state of every data node and LogClient.metadata,
through the seam only; no system is named here) and strikes when the moment
comes:

  leader            the leader of a key (drawn by the rng);
  follower-moved    a follower whose HW or LEO just moved (between two samples);
  leader-in-flight  the leader of a key while sends to that key are in flight;
  isr-change        a replica that just left or rejoined a key's ISR;
  last-standing     the only replica left in a key's ISR;
  back              (second move of a play) every other member of the ISR of a
                    key the previous move's node is in (the leader among
                    them), the instant that node was brought back (restarted,
                    resumed, healed): it is left the last replica standing
                    before it has caught up.

A moment that does not come within a quarter of the interval falls back to the
leader of a key (recorded as such). Holds are "brief" (0.1-0.3 x interval:
the node is back before the cluster notices) or "react" (until the key's
leader or ISR changes, at most 3 x interval), or "late" (the run's request timeout and
2 s more: the late-commit play).

The late-commit plays (transactional workloads with `pause` among the faults; issue 37):
`late-commit` pauses the leader of a key a transaction is sending to or committing,
`late-commit-coordinator` the node coordinating a transaction in flight (where the system
names it: DB.transaction_coordinator), each past the client's request timeout, resumed
before the cluster moves the leadership (a node's session: the run's settings make it longer
than the hold). What waited in the paused node's sockets (the transaction's sends, its end,
the coordinator's commit or abort markers) is handled on resume, after the client gave up on
it and went on with its next transaction: with one producer epoch for every transaction
(protocol v1) a late send, end or marker can belong to the wrong one.

Like the blind mode it is seeded: `moves(seed, ...)` fixes the sequence of
plays, faults, moments, holds and gaps; which node a moment picks depends on
what the cluster did (candidates are sorted, then drawn with the move's own
seed), as faults' effects do in the blind mode too. Every start op carries
`why`: the play, the moment, the key, and the state that was seen.
"""
from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Iterator

from harness.steps import FaultStep, RunContext, Sleep
from harness.sut import KeyMeta, ReplicaState
from nemesis import grudges
from nemesis.fault import Target, View

MOMENTS = ("leader", "follower-moved", "leader-in-flight", "isr-change", "last-standing", "back")
# `find` also knows "came-back" (a node that did not answer answers again); no play uses it: the
# inspector sees a restarted replica answer only after it has fetched, too late for the leader.
POLL_S = 0.1


@dataclass
class Snapshot:
    """One look at the cluster: the authority's metadata and each answering node's replicas."""

    time: int                                                   # history time (ns)
    meta: dict[int, KeyMeta] = field(default_factory=dict)
    states: dict[str, dict[int, ReplicaState]] = field(default_factory=dict)  # answering nodes only


class StateWatch:
    """Polls the seam (Inspector.state, LogClient.metadata) every POLL_S in the
    background and keeps the recent snapshots, numbered, so that a moment that
    came while a fault was being applied or undone is still seen."""

    KEEP = 200

    def __init__(self, ctx: RunContext, inspector, in_flight=None):
        self.ctx = ctx
        self.inspector = inspector
        self.nodes = list(ctx.plan.nodes)
        self.client = None
        self.in_flight = in_flight if in_flight is not None else {}   # key -> sends awaiting an answer
        self.snaps: list[Snapshot] = []
        self.seq = 0            # number of snapshots taken so far; snaps[-1] is number seq - 1
        self.changed = asyncio.Event()
        self.task: asyncio.Task | None = None

    @property
    def last(self) -> Snapshot | None:
        return self.snaps[-1] if self.snaps else None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            snap = await self.snap()
            self.snaps.append(snap)
            del self.snaps[:-self.KEEP]
            self.seq += 1
            self.changed.set()
            await asyncio.sleep(max(0.0, POLL_S - (time.monotonic() - t)))

    def pair(self, n: int) -> tuple[Snapshot, Snapshot] | None:
        """(snapshot n - 1, snapshot n), if both are still kept."""
        first = self.seq - len(self.snaps)
        if n - 1 < first or n >= self.seq:
            return None
        return self.snaps[n - 1 - first], self.snaps[n - first]

    async def wait_new(self) -> None:
        self.changed.clear()
        await self.changed.wait()

    async def snap(self) -> Snapshot:
        if self.client is None:
            self.client = ctx_client(self.ctx)
        meta_task = asyncio.ensure_future(self._meta())
        states = await asyncio.gather(*(self._state(n) for n in self.nodes))
        meta = await meta_task
        if not meta and self.last is not None:  # the authority did not answer: keep what it said last
            meta = self.last.meta
        return Snapshot(self.ctx.history.now(), meta, {n: s for n, s in zip(self.nodes, states) if s is not None})

    async def _state(self, node):
        try:
            return await self.inspector.state(node, timeout=0.5)
        except Exception:
            return None

    async def _meta(self) -> dict[int, KeyMeta]:
        try:
            return await asyncio.wait_for(self.client.metadata(), 1.0)
        except Exception:
            await self._reset_client()
            return {}

    async def _reset_client(self):
        client, self.client = self.client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), 2.0)
            except Exception:
                pass

    async def close(self):
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except BaseException:
                pass
        await self._reset_client()


def ctx_client(ctx: RunContext):
    return ctx.workload.client()


def _isr(snap: Snapshot, key: int) -> tuple[str, ...]:
    m = snap.meta.get(key)
    if m is not None and m.isr:
        return tuple(m.isr)
    leader = m.leader if m else None
    st = snap.states.get(leader or "", {}).get(key)
    return tuple(st.isr) if st is not None else ()


def _leader(snap: Snapshot, key: int) -> str | None:
    m = snap.meta.get(key)
    if m is not None and m.leader:
        return m.leader
    leaders = sorted(n for n, s in snap.states.items() if s.get(key) is not None and s[key].role == "leader")
    return leaders[0] if leaders else None


def _replicas(snap: Snapshot, key: int) -> tuple[str, ...]:
    m = snap.meta.get(key)
    return tuple(m.replicas) if m is not None and m.replicas else ()


def _keys(snap: Snapshot) -> list[int]:
    return sorted(set(snap.meta) | {k for s in snap.states.values() for k in s})


def _meta_json(snap: Snapshot, key: int) -> dict:
    return {"leader": _leader(snap, key), "isr": list(_isr(snap, key)),
            "epoch": (snap.meta.get(key).epoch if snap.meta.get(key) else None)}


def find(moment: str, prev: Snapshot, cur: Snapshot, rng: random.Random, in_flight: dict) -> tuple[str, dict] | None:
    """The node a moment picks in the step prev -> cur, with why; None if the moment is not there.
    Candidates are sorted before the rng picks, so the pick depends only on the seed and the state."""
    keys = _keys(cur)
    cands: list[tuple[str, dict]] = []
    if moment == "leader":
        for k in keys:
            if _leader(cur, k):
                cands.append((_leader(cur, k), {"key": k, **_meta_json(cur, k)}))
    elif moment == "follower-moved":
        for n in sorted(cur.states):
            for k, s in sorted(cur.states[n].items()):
                p = prev.states.get(n, {}).get(k)
                if s.role != "follower" or p is None:
                    continue
                if (s.hw, s.leo) != (p.hw, p.leo) and s.hw is not None:
                    cands.append((n, {"key": k, "hw": [p.hw, s.hw], "leo": [p.leo, s.leo], **_meta_json(cur, k)}))
    elif moment == "leader-in-flight":
        for k in keys:
            if in_flight.get(k, 0) > 0 and _leader(cur, k):
                cands.append((_leader(cur, k), {"key": k, "in_flight": in_flight[k], **_meta_json(cur, k)}))
    elif moment == "isr-change":
        for k in keys:
            before, now = set(_isr(prev, k)), set(_isr(cur, k))
            if not before or not now or before == now:
                continue
            for n in sorted(now - before):
                cands.append((n, {"key": k, "joined": n, "isr": [sorted(before), sorted(now)]}))
            for n in sorted(before - now):
                cands.append((n, {"key": k, "left": n, "isr": [sorted(before), sorted(now)]}))
    elif moment == "came-back":
        for n in sorted(set(cur.states) - set(prev.states)):
            for k in keys:
                leader = _leader(cur, k)
                if leader and leader != n and n in (_replicas(cur, k) or _isr(cur, k)):
                    cands.append((leader, {"key": k, "back": n, **_meta_json(cur, k)}))
    elif moment == "last-standing":
        for k in keys:
            isr = _isr(cur, k)
            if len(isr) == 1:
                cands.append((isr[0], {"key": k, **_meta_json(cur, k)}))
    if not cands:
        return None
    return rng.choice(cands)


async def wait_for(moment: str, watch: StateWatch, rng: random.Random, budget: float,
                   since: int) -> tuple[str | None, dict]:
    """Watch from snapshot `since` on until the moment comes (or the budget is
    spent: then the leader of a key)."""
    end = time.monotonic() + budget
    n = max(since, 1)
    while True:
        while n < watch.seq:
            pair = watch.pair(n)
            n += 1
            if pair is None:
                continue
            hit = find(moment, *pair, rng, dict(watch.in_flight))
            if hit is not None:
                node, why = hit
                return node, {"moment": moment, **why}
        if time.monotonic() >= end:
            cur = watch.last or Snapshot(0)
            hit = find("leader", cur, cur, rng, {})
            if hit is None:
                nodes = sorted(cur.states) or list(watch.nodes)
                return rng.choice(nodes), {"moment": moment, "fallback": "any node (no leader seen)"}
            node, why = hit
            return node, {"moment": moment, "fallback": "leader", **why}
        try:
            await asyncio.wait_for(watch.wait_new(), max(0.05, end - time.monotonic()))
        except asyncio.TimeoutError:
            pass


async def coordinator_in_flight(ctx: RunContext, watch: StateWatch, rng: random.Random, budget: float,
                                since: int) -> tuple[str | None, dict]:
    """The moment `coordinator-in-flight`: the node coordinating a transaction that is running
    now (the workload's txn_in_flight, the system's transaction_coordinator); the leader of a
    key when none is named within the budget."""
    end = time.monotonic() + budget
    seen: dict = {}
    while time.monotonic() < end:
        ids = sorted(t for t, n in (getattr(ctx.workload, "txn_in_flight", None) or {}).items() if n > 0)
        if ids:
            node, why = await ctx.db.transaction_coordinator(rng.choice(ids))
            if node in watch.nodes:
                return node, {"moment": "coordinator-in-flight", **why}
            seen = why
        await asyncio.sleep(POLL_S)
    node, why = await wait_for("leader", watch, rng, 0.0, since)
    return node, {**why, **seen, "moment": "coordinator-in-flight", "fallback": "leader"}


def isr_but_back(cur: Snapshot | None, nodes: list[str], rng: random.Random, back: str) -> tuple[list[str], dict]:
    """The moment `back`: the previous move's node was just brought back
    (restarted, resumed, healed) and may not have caught up yet; -> every
    other member of the ISR of a key it is in (its leader among them), so that
    it is left the last replica standing before it has caught up (waiting for
    its inspector to answer again is often too late: it fetches first)."""
    cur = cur or Snapshot(0)
    cands = []
    for k in _keys(cur):
        isr, leader = _isr(cur, k), _leader(cur, k)
        if leader and leader != back and back in isr:
            cands.append((sorted(set(isr) - {back}), {"key": k, "back": back, **_meta_json(cur, k)}))
    if not cands:
        node, why = find("leader", cur, cur, rng, {}) or (rng.choice(nodes), {})
        return [node], {"moment": "back", "back": back, "fallback": "leader", **why}
    victims, why = rng.choice(cands)
    return victims, {"moment": "back", **why}


def aim(fault, rng: random.Random, plan, nodes: list[str]) -> Target:
    """The fault on these nodes: its own `aim` if it has one, else its random
    choice with the first node as `leader` (the leader-shaped targets hit it)."""
    own = getattr(fault, "aim", None)
    if own is not None:
        return own(rng, plan, list(nodes))
    return fault.choose(rng, View(plan, nodes[0]))


@dataclass
class Hold:
    """A step: keep the fault on until the cluster reacts -- the key's leader or
    ISR differs from what it was when the fault started -- at most max_s."""

    watch: StateWatch
    key: int | None
    max_s: float
    deadline: float
    min_s: float = 0.5
    action: str = "hold"
    index: int | None = None
    id: str | None = None
    leader_is: str | None = None       # react only when this node leads the key
    leader_is_not: str | None = None   # react only when a node other than this one leads it
    isr_includes: tuple = ()           # react only when these are all in the key's ISR again

    def _reacted(self, before, cur) -> bool:
        leader = _leader(cur, self.key)
        if self.isr_includes:   # back in the ISR: caught up with (and truncated to) the leader's log
            return bool(leader) and set(self.isr_includes) <= set(_isr(cur, self.key))
        if not leader or (leader, _isr(cur, self.key)) == before:
            return False
        if self.leader_is is not None:
            return leader == self.leader_is
        return self.leader_is_not is None or leader != self.leader_is_not

    async def run(self, ctx) -> dict:
        start = time.monotonic()
        end = min(start + self.max_s, self.deadline)
        base = self.watch.last
        before = (_leader(base, self.key), _isr(base, self.key)) if base and self.key is not None else None
        while time.monotonic() < end:
            cur = self.watch.last
            if (time.monotonic() - start >= self.min_s and before is not None and cur is not None
                    and self._reacted(before, cur)):
                return {"reacted": True}
            try:
                await asyncio.wait_for(self.watch.wait_new(), max(0.05, end - time.monotonic()))
            except asyncio.TimeoutError:
                pass
        return {"reacted": False}


# Plays: short sequences of (moment, hold) the rng draws by weight. A hold is
# "brief" (0.1-0.3 x interval: back before the cluster notices) or "react"
# (until the key's leader or ISR changes, at most 3 x interval). The first
# play is the seeds' and KIP-101's: a follower faulted right after its HW
# moved, back at once, then its leader faulted the moment it is back.
PLAYS = (
    (6, "follower-then-leader", (("follower-moved", "brief"), ("back", "react"))),
    (1, "leader-in-flight", (("leader-in-flight", "react"),)),
    (1, "isr-change", (("isr-change", "brief"),)),
    (1, "last-standing", (("last-standing", "react"),)),
    (1, "leader", (("leader", "react"),)),
)


@dataclass
class Move:
    """One fault of a play, as the seed decides it (the node comes from the state)."""

    play: str
    step: int          # 1-based, within the play
    moment: str
    hold: str          # brief | react
    fault: str
    brief_s: float     # the hold if brief
    pick_seed: float   # seeds the draws among the state's candidates
    gap_s: float       # pause after the play (on its last move; else 0)


# KIP-279's fast fail-over (the `fast-failover` scenario, on every key's replicas):
# leader A killed while sends to it are in flight (first cut off from its followers
# for a moment when partition is among the faults, so that its log ends in records
# no follower fetched), B elected and taking writes at those offsets, then every other
# replica of the key killed, A restarted and elected unclean, the others restarted
# as A's followers. Drawn only where it can happen: kill among the faults and
# unclean.leader.election.enable true in the run's settings (A's election), and then
# about every other play (a 120 s run has room for two or three plays); other runs draw
# exactly what they drew before it existed.
FAST_FAILOVER = (12, "fast-failover", (("leader-in-flight", "react"),))
# The late-commit play (module docstring): drawn only for a transactional workload with pause
# among the faults, then on four plays in five.
LATE_COMMIT = (40, "late-commit", (("leader-in-flight", "late"),))
# Its twin on the transaction coordinator: the broker coordinating a transaction in flight (the
# workload's txn_in_flight; the system's transaction_coordinator), paused the same way; drawn
# where the system can name the coordinator.
LATE_COMMIT_COORDINATOR = (40, "late-commit-coordinator", (("coordinator-in-flight", "late"),))
LATE_PLAYS = (LATE_COMMIT[1], LATE_COMMIT_COORDINATOR[1])


def plays_for(faults: list[str], settings: dict, transactional: bool = False, coordinator: bool = False) -> tuple:
    unclean = str(settings.get("unclean.leader.election.enable", "")).lower() in ("true", "1")
    late = "pause" in faults and transactional
    return PLAYS + ((FAST_FAILOVER,) if "kill" in faults and unclean else ()) \
        + ((LATE_COMMIT,) if late else ()) + ((LATE_COMMIT_COORDINATOR,) if late and coordinator else ())


def moves(seed: int, faults: list[str], interval: float, plays: tuple = PLAYS) -> Iterator[Move]:
    """The seed's endless sequence of moves: everything the targeted mode draws
    that does not depend on the cluster's state. Same seed (and plays), same sequence."""
    rng = random.Random(seed)
    weights = [w for w, _, _ in plays]
    while True:
        _, play, steps = rng.choices(plays, weights)[0]
        drawn = []
        for i, (moment, hold) in enumerate(steps):
            fault = rng.choice(faults)
            if play in LATE_PLAYS:   # their point is the pause (drawn only when pause is a fault)
                fault = "pause"
            drawn.append(Move(play, i + 1, moment, hold, fault, interval * rng.uniform(0.1, 0.3),
                              rng.random(), 0.0))
        drawn[-1].gap_s = interval * rng.uniform(0.1, 0.3)
        yield from drawn


async def targeted_steps(ctx: RunContext, faults: list[str], seed: int, interval: float, deadline: float,
                         inspector, in_flight: dict | None = None) -> AsyncIterator:
    if not faults:
        return
    watch = StateWatch(ctx, inspector, in_flight)
    watch.start()
    try:
        yield Sleep(interval * random.Random(seed).uniform(0.3, 0.6), deadline)  # let the workload start
        since = watch.seq
        victims: list[str] = []
        plays = plays_for(faults, getattr(ctx.spec, "settings", None) or {},
                          bool(getattr(ctx.workload, "transactional", False)),
                          getattr(ctx.db, "transaction_coordinator", None) is not None
                          and getattr(ctx.workload, "txn_in_flight", None) is not None)
        for move in moves(seed, faults, interval, plays):
            if time.monotonic() >= deadline:
                return
            pick_rng = random.Random(move.pick_seed)
            if move.play == FAST_FAILOVER[1]:
                async for step in fast_failover(ctx, watch, move, pick_rng, interval, deadline, since, faults):
                    yield step
                since = watch.seq
                continue
            if move.moment == "back" and victims:
                victims, why = isr_but_back(watch.last, watch.nodes, pick_rng, victims[0])
            elif move.moment == "coordinator-in-flight":
                budget = min(interval / 4, max(0.0, deadline - time.monotonic()))
                node, why = await coordinator_in_flight(ctx, watch, pick_rng, budget, since)
                victims = [node]
            else:
                budget = min(interval / 4, max(0.0, deadline - time.monotonic()))
                node, why = await wait_for(move.moment, watch, pick_rng, budget, since)
                victims = [node]
            if time.monotonic() >= deadline:
                return
            fault = ctx.nemesis.fault(move.fault)[1]
            target = aim(fault, pick_rng, ctx.plan, victims)
            target.why = {"play": move.play, "step": move.step, **why, "nodes": victims, "hold": move.hold,
                          "seen_at": watch.last.time if watch.last else None}
            yield FaultStep(move.fault, target=target, action=move.fault)
            since = watch.seq   # the next moment may come while this fault acts or is undone
            if move.hold == "brief":
                yield Sleep(move.brief_s, deadline)
            elif move.hold == "late":   # past the client's request timeout (module docstring)
                yield Sleep(float(getattr(ctx.spec, "request_timeout", 5.0)) + 2.0, deadline)
            else:
                yield Hold(watch, why.get("key"), 3 * interval, deadline)
            yield FaultStep(move.fault, stop=True, action=f"stop {move.fault}")
            if move.gap_s:
                yield Sleep(move.gap_s, deadline)
                since = watch.seq
    finally:
        await watch.close()


async def fast_failover(ctx: RunContext, watch: StateWatch, move: Move, rng: random.Random, interval: float,
                        deadline: float, since: int, faults: list[str]) -> AsyncIterator:
    """The FAST_FAILOVER play, with kill (and, when partition is among the faults, A first
    cut off from its followers for a moment): each start op's `why` names its step."""
    budget = min(interval / 4, max(0.0, deadline - time.monotonic()))
    a, why = await wait_for(move.moment, watch, rng, budget, since)
    key = why.get("key")
    if key is None or time.monotonic() >= deadline:
        return
    seen = (lambda: watch.last.time if watch.last else None)
    base = {"play": move.play, "key": key}

    def kill(nodes, step, **more) -> FaultStep:
        t = Target(list(nodes), spec="targeted",
                   why={**base, "step": step, **more, "nodes": list(nodes), "seen_at": seen()})
        return FaultStep("kill", target=t, action="kill")

    cut = "partition" in faults
    if cut:   # A keeps taking sends its followers cannot fetch: its log grows a suffix nobody else has
        g = grudges.complete(ctx.plan.hosts)
        for other in watch.nodes:
            if other != a:
                g.remove_edges_from([(a, other), (other, a)])
        g.graph["reject"] = True   # refused, not dropped: A's replies written during the cut must not
        # reach the followers from A's kernel after the heal (A is killed, the cut healed, at once)
        yield FaultStep("partition", target=Target(sorted(watch.nodes), detail=g, spec="targeted", why={
            **base, "step": 1, "moment": "cut-from-followers", "nodes": [a], "seen_at": seen()}),
            action="partition")
        yield Sleep(move.brief_s, deadline)
    yield kill([a], 1, **{k: v for k, v in why.items() if k not in base})
    if cut:
        yield FaultStep("partition", stop=True, action="heal")
    yield Hold(watch, key, 3 * interval, deadline, leader_is_not=a)  # until another replica leads
    yield Sleep(move.brief_s, deadline)                              # ... and takes writes
    cur = watch.last or Snapshot(0)
    others = sorted((set(_replicas(cur, key)) or set(watch.nodes)) - {a})
    yield kill(others, 2, moment="new-leader", **_meta_json(cur, key))
    yield FaultStep("kill", stop=True, target=Target([a], spec="targeted"), action=f"restart {a}")
    yield Hold(watch, key, 3 * interval, deadline, leader_is=a)     # until the old leader leads (unclean;
    # not some other replica the metadata still names, a killed one not yet fenced)
    yield FaultStep("kill", stop=True, target=Target(others, spec="targeted"), action="restart the others")
    yield Hold(watch, key, 3 * interval, deadline, isr_includes=tuple(others))   # until they followed A
    # (truncated to its log): a next play that kills A first would elect them with their old logs
    yield Sleep(move.gap_s, deadline)

"""Fault `membership`: the operators' membership changes. Two actions:

- move: one key's replicas go to another set of nodes (one replica swapped for
  a node outside the set; with no node outside it, that replica is dropped), by
  the system's own reassignment (`DB.membership.reassign`: Kafka's
  AlterPartitionReassignments, the replica's controller);
- retire: every key a node holds is moved off it, then (after at most twice the
  schedule's interval for the moves to complete) the node is stopped and, where
  the system can (Kafka KRaft), unregistered.

Its stop (`membership-restore`) undoes both: retired nodes start again
(registering anew) and every moved key goes back to its set, in its order
(retried for up to 2 minutes while a just-started node is not registered yet). The final phase
restarts what is down and leaves the assignment as it is.

Random schedule: move twice as often as retire. Targeted schedule: move a key
off the node the moment picked. Scenario steps: `membership: {move: {key: 0,
to: [B, C]}}`, `membership: {retire: B}`, `membership-restore:`.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

from harness.sut import MEMBERSHIP, PROCESS, require
from nemesis.fault import FaultArgError, FaultKind, Target, kill_and_wait

ACTIONS = ("move", "move", "retire")
RESTORE_S = 120.0   # a restarted broker registers within this (a JVM on a loaded 2-core machine: up to a minute)


@dataclass
class MembershipArgs:
    """A scripted step: `{move: {key: K, to: [nodes]}}` or `{retire: NODE}`."""

    action: str
    key: int | None = None
    to: list[str] | None = None
    node: str | None = None

    def refs(self) -> list[str]:
        return list(self.to or []) + ([self.node] if self.node else [])

    def resolve(self, node, plan) -> Target:
        if self.action == "retire":
            return Target([node(self.node)], detail={"action": "retire", "draw": 0.0, "seed": 0})
        return Target([], detail={"action": "move", "key": self.key, "to": [node(r) for r in self.to],
                                  "draw": 0.0, "seed": 0})


def parse_start(arg) -> MembershipArgs:
    if isinstance(arg, dict) and set(arg) == {"retire"} and isinstance(arg["retire"], str):
        return MembershipArgs("retire", node=arg["retire"])
    if isinstance(arg, dict) and set(arg) == {"move"} and isinstance(arg["move"], dict):
        m = arg["move"]
        to = m.get("to")
        if (set(m) == {"key", "to"} and isinstance(m["key"], int) and not isinstance(m["key"], bool)
                and isinstance(to, list) and to and all(isinstance(r, str) for r in to) and len(set(to)) == len(to)):
            return MembershipArgs("move", key=m["key"], to=list(to))
    raise FaultArgError("takes {move: {key: 0, to: [B, C]}} (distinct nodes) or {retire: B}")


def parse_stop(arg):
    if arg not in (None, {}, True, "all"):
        raise FaultArgError("takes no arguments (write `- membership-restore:`): it undoes every change")
    return None


class Membership:
    def __init__(self, env):
        self.process = require(env.db, PROCESS, "fault membership")
        self.members = require(env.db, MEMBERSHIP, "fault membership")
        self.nodes = list(env.plan.nodes)
        self.wait_s = 2 * env.interval
        self.log = env.log
        self.moved: list[tuple[int, list[str]]] = []   # (key, replicas before), oldest first
        self.retired: list[str] = []

    def choose(self, rng, view):
        action = rng.choice(ACTIONS)
        nodes = [rng.choice(view.plan.nodes)] if action == "retire" else []
        return Target(nodes, detail={"action": action, "draw": rng.random(), "seed": rng.randrange(2 ** 31)},
                      spec=action)

    def aim(self, rng, plan, nodes):
        """The targeted schedule's target: a key moved off the node the moment picked."""
        return Target(list(nodes)[:1], detail={"action": "move", "draw": rng.random(),
                                               "seed": rng.randrange(2 ** 31)}, spec="targeted")

    # -- actions ---------------------------------------------------------------
    def _without(self, cur: list[str], out: str, rng: random.Random) -> list[str] | None:
        """`cur` with `out` swapped for a node outside it (dropped when there is none)."""
        outside = [n for n in self.nodes if n not in cur]
        if outside:
            new = rng.choice(outside)
            return [new if r == out else r for r in cur]
        return [r for r in cur if r != out] if len(cur) > 1 else None

    def start(self, target: Target):
        d = dict(target.detail or {})
        rng = random.Random(d.get("seed", 0))
        reps = self.members.replicas()
        if d.get("action") == "retire":
            return self._retire(target.nodes[0], reps, rng)
        key = d.get("key")
        if key is None:
            off = target.nodes[0] if target.nodes else None
            keys = sorted(k for k, r in reps.items() if off is None or off in r) or sorted(reps)
            key = keys[min(len(keys) - 1, int(d.get("draw", 0.0) * len(keys)))]
        cur = reps.get(key)
        if cur is None:
            raise RuntimeError(f"membership: key {key} is not a key of this run ({sorted(reps)})")
        new = d.get("to")
        if new is None:
            off = target.nodes[0] if target.nodes and target.nodes[0] in cur else rng.choice(cur)
            new = self._without(cur, off, rng)
        if not new or new == cur:
            return {"action": "move", "key": key, "from": cur, "to": cur, "text": f"key {key}: no other set"}
        self.members.reassign(key, new)
        self.moved.append((key, cur))
        return {"action": "move", "key": key, "from": cur, "to": new,
                "text": f"key {key} {' '.join(cur)} -> {' '.join(new)}"}

    def _retire(self, node: str, reps: dict, rng: random.Random) -> dict:
        moves = {}
        for key, cur in sorted(reps.items()):
            if node in cur:
                new = self._without(cur, node, rng)
                if new:
                    self.members.reassign(key, new)
                    self.moved.append((key, cur))
                    moves[key] = {"from": cur, "to": new}
        complete = self._await(lambda r: all(node not in r.get(k, []) for k in moves))
        kill_and_wait(self.process, [node])
        unregister = getattr(self.members, "unregister", None)
        registration = unregister(node) if unregister is not None else "stopped"
        if node not in self.retired:
            self.retired.append(node)
        return {"action": "retire", "node": node, "moved": {str(k): v for k, v in moves.items()},
                "moves_complete": complete, "registration": registration,
                "text": f"{node} retired ({len(moves)} keys moved off{'' if complete else ', not all complete'}; "
                        f"{registration})"}

    def _await(self, done) -> bool:
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            try:
                if done(self.members.replicas()):
                    return True
            except Exception:
                pass
            time.sleep(0.5)
        return False

    def stop(self, target, rng, record):
        started = [n for n in self.retired if not self.process.running(n)]
        for n in started:
            self.process.start(n)
        self.retired = []
        back, failed = {}, {}
        for key, cur in reversed(self.moved):    # the oldest set wins: the key's set before any move
            back[key] = cur
        self.moved = []
        deadline = time.monotonic() + max(RESTORE_S, self.wait_s)
        for key, cur in sorted(back.items()):
            while True:
                try:
                    self.members.reassign(key, cur)
                    break
                except Exception as e:   # a just-started broker not registered yet
                    if time.monotonic() >= deadline:
                        failed[str(key)] = str(e).splitlines()[0] if str(e) else type(e).__name__
                        self.log(f"membership: key {key} not moved back: {e}")
                        break
                    time.sleep(1.0)
        text = ", ".join(f"key {k} -> {' '.join(v)}" for k, v in sorted(back.items()) if str(k) not in failed)
        if failed:
            text += f"{', ' if text else ''}not moved back: key {', '.join(sorted(failed))}"
        record(MEMBERSHIP_FAULT.stop, {"started": started, "back": {str(k): v for k, v in sorted(back.items())},
                                       "failed": failed,
                                       "text": "; ".join(filter(None, [f"started {' '.join(started)}" if started
                                                                       else "", text])) or "nothing to undo"})

    def heal(self) -> None:
        self.moved, self.retired = [], []   # the runner restarts what is down; the assignment stays


MEMBERSHIP_FAULT = FaultKind(
    name="membership", start="membership", stop="membership-restore", stop_step="membership-restore",
    colour="#2ca02c", needs=(PROCESS, MEMBERSHIP), make=Membership, targets=("one",),
    parse_start=parse_start, parse_stop=parse_stop,
    description="move a key's replicas to another set of nodes, or retire a node (its keys moved off, "
                "stopped, unregistered where the system can); membership-restore starts it and moves them back")

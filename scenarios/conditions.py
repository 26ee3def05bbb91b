"""The `wait until` condition language, over the sampled cluster state.

A condition is clauses joined by `and` and `or` (`and` binds tighter: a
condition holds when all clauses of one of its `or` alternatives hold). Clauses (K a key, X a node reference
as in `roles`, V an integer or another quantity):

    leader of key K is X          leader of key K is not X       leader of key K is none
    isr of key K is full          isr of key K includes X        isr of key K excludes X
    isr size of key K >= V        leader epoch of key K > V      election on key K
    leo of X on key K >= V        hw of X on key K reaches V     checkpointed hw of X on key K >= V
    role of X on key K is leader|follower|none                   X is up / X is down

Comparison operators: == (or =, is), !=, >=, <=, >, <, and `reaches` (>=).
`leader ... is X` holds when the authority names X *and* X's own state says
it leads in that epoch. ISR, leader and epoch come from the system's
metadata (LogClient.metadata); LEO, HW and role from the node's state
(Inspector.state: capability `inspect`); `checkpointed hw` from its persisted
HW (Inspector.checkpoints: `checkpoints`); `X is up` from its process
(`process`); `election on key K` means the leader epoch grew since the last
fault step (or since the wait began). `needs()` names the capabilities a
condition uses, so a script is refused before any host exists when its system
lacks one.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

from scenarios import roles


class ConditionError(ValueError):
    """A condition that cannot be parsed (one line)."""


OPS = {"==": operator.eq, "=": operator.eq, "is": operator.eq, "!=": operator.ne, "is not": operator.ne,
       ">=": operator.ge, "reaches": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


@dataclass(frozen=True)
class Quantity:
    kind: str  # leo | hw | log_start | local_log_start | remote_end | checkpoint | epoch | isr_size
    key: int
    node: roles.Ref | None = None

    def text(self) -> str:
        name = {"leo": "leo", "hw": "hw", "log_start": "log start", "checkpoint": "checkpointed hw",
                "local_log_start": "local log start", "remote_end": "remote end"}.get(self.kind)
        if name:
            return f"{name} of {self.node.text()} on key {self.key}"
        return {"epoch": "leader epoch", "isr_size": "isr size"}[self.kind] + f" of key {self.key}"


@dataclass(frozen=True)
class Clause:
    kind: str  # compare | leader | isr_full | isr_has | role | election | up
    key: int = 0
    lhs: Quantity | None = None
    op: str = "=="
    rhs: object = None  # int | Quantity | roles.Ref | None | str
    node: roles.Ref | None = None
    negate: bool = False
    text: str = ""


@dataclass
class Condition:
    alternatives: list[list[Clause]]  # or of ands
    text: str

    @property
    def clauses(self) -> list[Clause]:
        return [c for alt in self.alternatives for c in alt]

    def needs(self) -> set[str]:
        return needs(self)

    def checkpoint_refs(self) -> list[roles.Ref]:
        """Nodes whose checkpoint file the waiter must read each round."""
        out = []
        for c in self.clauses:
            for q in (c.lhs, c.rhs):
                if isinstance(q, Quantity) and q.kind == "checkpoint":
                    out.append(q.node)
        return out


def needs(cond: "Condition") -> set[str]:
    """Capabilities of the system (harness.sut) the condition reads."""
    out = set()
    for c in cond.clauses:
        for q in (c.lhs, c.rhs):
            if isinstance(q, Quantity) and q.kind in _STATE_KINDS:
                out.update(("inspect", "offsets"))  # the replica's own offsets (not every system has them)
            elif isinstance(q, Quantity) and q.kind == "checkpoint":
                out.add("checkpoints")
        if c.kind in ("role",) or (c.kind == "leader" and c.rhs is not None):
            out.add("inspect")
        if c.kind == "up":
            out.add("process")
    return out


@dataclass
class Observation:
    """What the scenario saw at one moment. Nodes are host names (n1, ...)."""

    metadata: dict[int, dict] | None = None  # authority: {key: KeyMeta.as_json()} (node names)
    states: dict[str, dict[int, dict]] = field(default_factory=dict)  # node -> key -> ReplicaState.as_json()
    checkpoints: dict[str, dict[int, int]] = field(default_factory=dict)  # node -> key -> checkpointed HW
    up: dict[str, bool] = field(default_factory=dict)  # node -> process running
    epoch_baseline: dict[int, int] = field(default_factory=dict)  # key -> epoch at the last fault step
    aliases: dict[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------- parsing
_I = re.IGNORECASE
_KEY = r"key\s+(\d+)"
_Q_NODE = re.compile(rf"^(leo|hw|log\s+start|local\s+log\s+start|remote\s+end|checkpointed\s+hw)\s+of\s+(.+?)"
                     rf"\s+on\s+{_KEY}$", _I)
# Quantities read from a node's State (tiered storage adds the local log start and the remote end).
_NODE_KINDS = {"leo": "leo", "hw": "hw", "log start": "log_start", "local log start": "local_log_start",
               "remote end": "remote_end", "checkpointed hw": "checkpoint"}
_STATE_KINDS = ("leo", "hw", "log_start", "local_log_start", "remote_end")
_Q_KEY = re.compile(rf"^(leader\s+epoch|isr\s+size)\s+of\s+{_KEY}$", _I)
_LEADER = re.compile(rf"^leader\s+of\s+{_KEY}\s+is(\s+not)?\s+(.+)$", _I)
_NO_LEADER = re.compile(rf"^no\s+leader\s+(?:for|of)\s+{_KEY}$", _I)
_ISR_FULL = re.compile(rf"^isr\s+of\s+{_KEY}\s+is\s+full$", _I)
_ISR_HAS = re.compile(rf"^isr\s+of\s+{_KEY}\s+(includes|contains|excludes)\s+(.+)$", _I)
_ISR_SIZE = re.compile(rf"^isr\s+of\s+{_KEY}\s+has\s+size\s+(\d+)$", _I)
_ROLE = re.compile(rf"^role\s+of\s+(.+?)\s+on\s+{_KEY}\s+is\s+(leader|follower|none)$", _I)
_ELECTION = re.compile(rf"^(?:an\s+)?election\s+(?:happened\s+)?on\s+{_KEY}$", _I)
_UP = re.compile(r"^(.+?)\s+is\s+(up|down)$", _I)
_COMPARE = re.compile(r"^(.+?)\s+(>=|<=|==|!=|=|>|<|is\s+not|is|reaches)\s+(.+)$", _I)


def parse(text: str, layout: roles.Layout, bound: set[str]) -> Condition:
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("empty condition; e.g. until: leader of key 0 is n2")
    text = " ".join(text.split())
    alternatives = [[_clause(p, layout, bound) for p in re.split(r"\s+and\s+", alt, flags=_I)]
                    for alt in re.split(r"\s+or\s+", text, flags=_I)]
    return Condition(alternatives, text)


def _ref(text: str, layout, bound) -> roles.Ref:
    try:
        ref = roles.parse_ref(text, layout, bound)
    except roles.RefError as e:
        raise ConditionError(str(e)) from None
    if ref.meta:
        raise ConditionError(f"{text!r}: conditions do not follow the metadata group; bind it in a step "
                             f"(`bind: {{M: {ref.text()}}}`) and name M")
    return ref


def _key(k: str, layout: roles.Layout) -> int:
    key = int(k)
    if key >= layout.keys:
        raise ConditionError(f"key {key} does not exist (keys 0..{layout.keys - 1})")
    return key


def _quantity(text: str, layout, bound) -> Quantity | None:
    m = _Q_NODE.match(text)
    if m:
        kind = _NODE_KINDS[" ".join(m.group(1).lower().split())]
        node = _ref(m.group(2), layout, bound)
        if node.kind == "node" and node.name in layout.roles.values():
            raise ConditionError(f"{text!r}: {node.name} holds no replica (a role host)")
        return Quantity(kind, _key(m.group(3), layout), node)
    m = _Q_KEY.match(text)
    if m:
        kind = "epoch" if m.group(1).lower().startswith("leader") else "isr_size"
        return Quantity(kind, _key(m.group(2), layout))
    return None


def _clause(text: str, layout, bound) -> Clause:
    m = _NO_LEADER.match(text)
    if m:
        return Clause("leader", key=_key(m.group(1), layout), rhs=None, text=text)
    m = _LEADER.match(text)
    if m:
        target = m.group(3).strip()
        rhs = None if target.lower() == "none" else _ref(target, layout, bound)
        return Clause("leader", key=_key(m.group(1), layout), rhs=rhs, negate=bool(m.group(2)), text=text)
    m = _ISR_FULL.match(text)
    if m:
        return Clause("isr_full", key=_key(m.group(1), layout), text=text)
    m = _ISR_HAS.match(text)
    if m:
        return Clause("isr_has", key=_key(m.group(1), layout), node=_ref(m.group(3), layout, bound),
                      negate=m.group(2).lower() == "excludes", text=text)
    m = _ISR_SIZE.match(text)
    if m:
        return Clause("compare", lhs=Quantity("isr_size", _key(m.group(1), layout)), op="==",
                      rhs=int(m.group(2)), text=text)
    m = _ROLE.match(text)
    if m:
        return Clause("role", key=_key(m.group(2), layout), node=_ref(m.group(1), layout, bound),
                      rhs=m.group(3).lower(), text=text)
    m = _ELECTION.match(text)
    if m:
        return Clause("election", key=_key(m.group(1), layout), text=text)
    m = _COMPARE.match(text)
    if m:
        lhs = _quantity(m.group(1).strip(), layout, bound)
        if lhs is not None:
            right = m.group(3).strip()
            rhs = int(right) if re.fullmatch(r"-?\d+", right) else _quantity(right, layout, bound)
            if rhs is None:
                raise ConditionError(f"{text!r}: right side {right!r} is neither a number nor a quantity "
                                     f"such as leo of n1 on key 0")
            return Clause("compare", lhs=lhs, op=" ".join(m.group(2).lower().split()), rhs=rhs, text=text)
    m = _UP.match(text)
    if m:
        return Clause("up", node=_ref(m.group(1), layout, bound), negate=m.group(2).lower() == "down", text=text)
    raise ConditionError(f"cannot parse condition {text!r}; see the clauses in scenarios/README.md "
                         f"(e.g. leader of key 0 is n2, isr of key 0 is full, leo of A on key 0 >= 5)")


# ----------------------------------------------------------------- evaluation
def _node(ref: roles.Ref, obs: Observation) -> str:
    return roles.resolve(ref, obs.metadata or {}, obs.aliases)


def value(q: Quantity, obs: Observation):
    """The quantity's value now, or None if it is not known (node down, no metadata)."""
    if q.kind in ("epoch", "isr_size"):
        part = (obs.metadata or {}).get(q.key)
        if part is None:
            return None
        return part.get("leader_epoch") if q.kind == "epoch" else len(part.get("isr") or [])
    try:
        node = _node(q.node, obs)
    except roles.RefError:
        return None
    if q.kind == "checkpoint":
        return obs.checkpoints.get(node, {}).get(q.key)
    part = obs.states.get(node, {}).get(q.key)
    return None if part is None else part.get(q.kind)


def evaluate(cond: Condition, obs: Observation) -> tuple[bool, str]:
    """(holds, what was seen) -- the second part names every clause's current value."""
    seen, ok = [], False
    for alt in cond.alternatives:
        all_hold = True
        for c in alt:
            holds, text = _evaluate(c, obs)
            all_hold &= holds
            if text not in seen:
                seen.append(text)
        ok |= all_hold
    return ok, "; ".join(seen)


def _evaluate(c: Clause, obs: Observation) -> tuple[bool, str]:
    meta = (obs.metadata or {}).get(c.key) if c.kind in ("leader", "isr_full", "isr_has", "election") else None
    if c.kind == "compare":
        left = value(c.lhs, obs)
        right = value(c.rhs, obs) if isinstance(c.rhs, Quantity) else c.rhs
        shown = f"{c.lhs.text()} = {left}" + (f", {c.rhs.text()} = {right}" if isinstance(c.rhs, Quantity) else "")
        if left is None or right is None:
            return False, shown
        return bool(OPS[c.op](left, right)), shown
    if c.kind == "leader":
        leader = None if meta is None else meta.get("leader")
        now = "unknown (no metadata)" if meta is None else ("none" if leader is None else leader)
        shown = f"leader of key {c.key} = {now}" + (f" ({meta['view_from']}'s view)" if meta and meta.get("view_from") else "")
        if meta is None:
            return False, shown
        if c.rhs is None:
            holds = leader is None
        else:
            try:
                want = _node(c.rhs, obs)
            except roles.RefError:
                return False, shown
            acting = obs.states.get(want, {}).get(c.key, {})
            holds = (leader is not None and leader == want and acting.get("role") == "leader"
                     and acting.get("leader_epoch") == meta.get("leader_epoch"))
        return (not holds) if c.negate else holds, shown
    if c.kind in ("isr_full", "isr_has"):
        if meta is None:
            return False, f"isr of key {c.key} = unknown (no metadata)"
        isr = sorted(meta.get("isr") or [])
        shown = f"isr of key {c.key} = {isr}"
        if c.kind == "isr_full":
            return set(isr) >= set(meta.get("replicas") or []), shown
        try:
            member = _node(c.node, obs) in isr
        except roles.RefError:
            return False, shown
        return member != c.negate, shown
    if c.kind == "role":
        try:
            node = _node(c.node, obs)
        except roles.RefError:
            return False, f"role of {c.node.text()} = unknown"
        part = obs.states.get(node, {}).get(c.key)
        role = None if part is None else part.get("role")
        return role == c.rhs, f"role of {node} on key {c.key} = {role or 'no answer'}"
    if c.kind == "election":
        epoch = None if meta is None else meta.get("leader_epoch")
        base = obs.epoch_baseline.get(c.key)
        shown = f"leader epoch of key {c.key} = {epoch} (was {base})"
        return epoch is not None and base is not None and epoch > base, shown
    # up / down
    try:
        node = _node(c.node, obs)
    except roles.RefError:
        return False, f"{c.node.text()} = unknown"
    running = obs.up.get(node)
    shown = f"{node} is {'up' if running else 'down' if running is not None else 'unknown'}"
    if running is None:
        return False, shown
    return running != c.negate, shown

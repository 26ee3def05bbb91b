"""Fault `partition`: iptables grudges between the system's hosts (data
nodes and role hosts); `heal` removes every rule.

Random schedule: a grudge kind (nemesis.grudges: one node, halves,
majorities ring, bridge, the leader, one-way, a role host). Scenario step:
`partition: {cut: [X, Y]} | {one-way: {from: X, to: Y}} | {isolate: X} |
{grudge: {X: [Y, Z]}}` (lists of each allowed), added to the rules in place;
`reject: true` refuses the packets (TCP reset) instead of dropping them.
`heal:` removes every rule; `heal: {one-way: {from: X, to: Y}}` (any of the
above) only those, and the others stay.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nemesis import grudges
from nemesis.fault import FaultArgError, FaultKind, Target, parse_model
from nemesis.network import Network


class PartitionArgs(BaseModel):
    """A scripted partition: grudges, all applied together."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    grudge: dict[str, list[str]] = Field(default_factory=dict)  # node -> nodes whose packets it drops
    cut: list[list[str]] = Field(default_factory=list)  # [X, Y]: no packets either way
    one_way: list[dict[str, str]] = Field(default_factory=list, alias="one-way")  # {from: X, to: Y}
    isolate: list[str] = Field(default_factory=list)  # X hears nobody, nobody hears X
    reject: bool = False  # refuse (TCP reset) rather than drop: no reply waits in a kernel for the heal

    @field_validator("cut", mode="before")
    @classmethod
    def _one_pair(cls, v):
        return [v] if isinstance(v, list) and v and all(isinstance(x, str) for x in v) else v

    @field_validator("one_way", mode="before")
    @classmethod
    def _one_dict(cls, v):
        return [v] if isinstance(v, dict) else v

    @field_validator("isolate", mode="before")
    @classmethod
    def _one_node(cls, v):
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self):
        for pair in self.cut:
            if len(pair) != 2:
                raise ValueError(f"cut takes pairs [X, Y], got {pair}")
        for ow in self.one_way:
            if set(ow) != {"from", "to"}:
                raise ValueError(f"one-way takes {{from: X, to: Y}}, got {ow}")
        if not (self.grudge or self.cut or self.one_way or self.isolate):
            raise ValueError("empty partition: give grudge, cut, one-way or isolate")
        return self

    def refs(self) -> list[str]:
        refs = [n for k, v in self.grudge.items() for n in (k, *v)]
        refs += [n for pair in self.cut for n in pair]
        refs += [n for ow in self.one_way for n in ow.values()]
        return refs + list(self.isolate)

    def resolve(self, node, plan) -> Target:
        """The grudge graph: every host connected, minus the edges the script cuts."""
        hosts = plan.hosts
        edges = []  # (from, to): packets from `from` no longer reach `to`
        for dst, sources in self.grudge.items():
            edges += [(node(s), node(dst)) for s in sources]
        for x, y in self.cut:
            x, y = node(x), node(y)
            edges += [(x, y), (y, x)]
        for ow in self.one_way:
            edges.append((node(ow["from"]), node(ow["to"])))
        for x in map(node, self.isolate):
            edges += [(x, h) for h in hosts if h != x] + [(h, x) for h in hosts if h != x]
        g = grudges.complete(hosts)
        for src, dst in edges:
            if src == dst:
                raise FaultArgError(f"cannot cut {src} from itself")
            stranger = next((h for h in (src, dst) if h not in g), None)
            if stranger is not None:   # a cut to a host the run lacks would drop nothing
                raise FaultArgError(f"{stranger} is not a host of this run ({', '.join(hosts)})")
            if g.has_edge(src, dst):
                g.remove_edge(src, dst)
        g.graph["reject"] = self.reject
        return Target(sorted({n for e in edges for n in e}), detail=g)


def parse_start(arg: Any) -> PartitionArgs:
    return parse_model(PartitionArgs, arg)


def parse_stop(arg: Any) -> PartitionArgs | None:
    """`- heal:` removes every rule; `- heal: {one-way: {from: A, to: ctl}}` (any argument of
    `partition`) removes only those cuts and keeps the others."""
    if arg in (None, {}, True, "all"):
        return None
    if not isinstance(arg, dict):
        raise FaultArgError("takes nothing (every cut) or the cuts to heal, e.g. heal: {one-way: {from: A, to: ctl}}")
    return parse_model(PartitionArgs, arg)


class Partition:
    def __init__(self, env):
        self.network = Network({h: env.remotes[h] for h in env.plan.hosts})
        self.plan = env.plan
        role = next(iter(env.plan.roles.values()), None)
        self.role_host = role
        self.kinds = [k for k in grudges.KINDS if k != "controller" or role is not None]

    def choose(self, rng, view):
        kind = rng.choice(self.kinds)
        g = grudges.make(kind, self.plan.hosts, rng, leader=view.leader, controller=self.role_host)
        return Target(sorted(g.nodes), detail=g, spec=kind)

    def aim(self, rng, plan, nodes):
        """The targeted schedule's target: these nodes cut off from every other host, together
        (one node: isolated; nemesis.targeted)."""
        if len(nodes) == 1:
            g = grudges.isolate(self.plan.hosts, nodes[0])
        else:
            g = grudges.components([sorted(nodes), sorted(set(self.plan.hosts) - set(nodes))])
        return Target(sorted(g.nodes), detail=g, spec="isolate")

    def start(self, target: Target):
        out = {"kind": target.spec, "grudge": self.network.apply(target.detail)}
        return {**out, "reject": True} if target.detail.graph.get("reject") else out

    def stop(self, target, rng, record):
        if target is not None and target.detail is not None:   # a scripted partial heal
            record(PARTITION.stop, {"healed": self.network.unapply(target.detail)})
            return
        self.network.heal()
        record(PARTITION.stop, None)

    def heal(self):
        self.network.heal()


PARTITION = FaultKind(name="partition", start="partition", stop="heal", colour="#1f77b4", make=Partition,
                      parse_start=parse_start, parse_stop=parse_stop,
                      description="iptables grudges between hosts: one node, halves, majorities ring, "
                                  "bridge, the leader, one-way, a role host; heal drops them all")

"""Node references in scenario scripts: a host named directly (`n2`, or a
role host of the system such as the replica's `ctl`), a role host by its
role (`the controller`), a key role resolved at the moment the step runs
(`leader of key 0`, `a follower of key 0`, `follower 2 of key 0`), a role in
the system's metadata group resolved at the moment the step runs (`the
metadata leader`, `a metadata follower`, `metadata follower 2`: NATS's
JetStream meta group, capability META_GROUP), or a name bound by an earlier
step (`as: A`, `bind: {A: ...}`).

Key roles are resolved against the system's authority (LogClient.metadata:
leaders and replica assignment by node name), so `a follower of key 0` is the
first replica of key 0 in assignment order that is not its leader. Metadata
roles are resolved against the group the nodes report (Inspector.meta_group:
{"leader": node, "members": [nodes]}): `metadata follower I` is the I-th
member in name order that is not the leader.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


class RefError(ValueError):
    """A node reference that cannot be parsed or resolved (one line)."""


@dataclass(frozen=True)
class Layout:
    nodes: int
    keys: int
    replication_factor: int
    roles: dict[str, str] = field(default_factory=dict)  # role -> host (the replica: controller -> ctl)

    def hosts(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)] + list(self.roles.values())

    def role_host(self, text: str) -> str | None:
        """`ctl`, `the controller`, `controller` -> its host, for the system's role hosts."""
        low = re.sub(r"^the\s+", "", text)
        for role, host in self.roles.items():
            if low in (role, host):
                return host
        return None

    def describe(self) -> str:
        return f"n1..n{self.nodes}" + "".join(f", {h}" for h in self.roles.values())


@dataclass(frozen=True)
class Ref:
    kind: str  # node | alias | leader | follower | meta-leader | meta-follower
    name: str | None = None  # node or alias name
    key: int = 0
    index: int = 1  # follower index, 1-based

    def text(self) -> str:
        if self.kind in ("node", "alias"):
            return self.name
        if self.kind == "leader":
            return f"leader of key {self.key}"
        if self.kind == "meta-leader":
            return "the metadata leader"
        if self.kind == "meta-follower":
            return f"metadata follower {self.index}"
        return f"follower {self.index} of key {self.key}"

    @property
    def meta(self) -> bool:
        """A role in the system's metadata group (resolved with Inspector.meta_group)."""
        return self.kind in ("meta-leader", "meta-follower")


_LEADER = re.compile(r"^(?:the\s+)?leader\s+of\s+key\s+(\d+)$")
_FOLLOWER = re.compile(r"^(?:(?:a|the)\s+follower|follower\s+(\d+))\s+of\s+key\s+(\d+)$")
_NODE = re.compile(r"^n(\d+)$")
_META_LEADER = re.compile(r"^(?:the\s+)?meta(?:data)?\s+leader$")
_META_FOLLOWER = re.compile(r"^(?:(?:a|the)\s+meta(?:data)?\s+follower|meta(?:data)?\s+follower\s+(\d+))$")


def parse_ref(text: str, layout: Layout, bound: set[str]) -> Ref:
    t = " ".join(str(text).split())
    low = t.lower()
    host = layout.role_host(low)
    if host is not None:
        return Ref("node", host)
    m = _NODE.match(low)
    if m:
        n = int(m.group(1))
        if not 1 <= n <= layout.nodes:
            raise RefError(f"unknown node {t!r}: this scenario has {layout.describe()}")
        return Ref("node", f"n{n}")
    m = _LEADER.match(low)
    if m:
        return Ref("leader", key=_key(int(m.group(1)), layout))
    m = _FOLLOWER.match(low)
    if m:
        index = int(m.group(1) or 1)
        if not 1 <= index < layout.replication_factor:
            raise RefError(f"{t!r}: key has {layout.replication_factor - 1} followers (replication factor "
                           f"{layout.replication_factor})")
        return Ref("follower", key=_key(int(m.group(2)), layout), index=index)
    if _META_LEADER.match(low):
        return Ref("meta-leader")
    m = _META_FOLLOWER.match(low)
    if m:
        index = int(m.group(1) or 1)
        if not 1 <= index < layout.nodes:
            raise RefError(f"{t!r}: the metadata group of {layout.nodes} nodes has {layout.nodes - 1} followers")
        return Ref("meta-follower", index=index)
    if t in bound:
        return Ref("alias", t)
    if re.match(r"^[A-Za-z_]\w*$", t):
        raise RefError(f"unknown node {t!r}: not a host ({layout.describe()}) and not bound by an "
                       f"earlier step (`as: {t}` or `bind`)")
    roles = "".join(f", the {r}" for r in layout.roles)
    raise RefError(f"bad node reference {t!r}: use {layout.describe()}{roles}, leader of key K, "
                   f"a follower of key K, follower I of key K, the metadata leader, metadata follower I, "
                   f"or a name bound earlier")


def _key(key: int, layout: Layout) -> int:
    if key >= layout.keys:
        raise RefError(f"key {key} does not exist (keys 0..{layout.keys - 1})")
    return key


def resolve(ref: Ref, metadata: dict[int, dict], aliases: dict[str, str], group: dict | None = None) -> str:
    """The host name a reference means now. metadata: the authority's
    {key: {"leader": node, "replicas": [nodes], ...}} (KeyMeta.as_json);
    group: the metadata group {"leader": node | None, "members": [nodes]}
    (Inspector.meta_group), needed by metadata roles only."""
    if ref.kind == "node":
        return ref.name
    if ref.kind == "alias":
        return aliases[ref.name]
    if ref.meta:
        leader = (group or {}).get("leader")
        if leader is None:
            raise RefError(f"{ref.text()}: the metadata group has no leader now")
        if ref.kind == "meta-leader":
            return leader
        followers = sorted(m for m in (group or {}).get("members", ()) if m != leader)
        if len(followers) < ref.index:
            raise RefError(f"{ref.text()}: the metadata group has only {len(followers)} followers")
        return followers[ref.index - 1]
    part = metadata.get(ref.key)
    if part is None:
        raise RefError(f"{ref.text()}: key {ref.key} is unknown to the system")
    leader = part.get("leader")
    if ref.kind == "leader":
        if leader is None:
            raise RefError(f"{ref.text()}: key {ref.key} has no leader now")
        return leader
    followers = [r for r in part.get("replicas", []) if r != leader]
    if len(followers) < ref.index:
        raise RefError(f"{ref.text()}: key {ref.key} has only {len(followers)} followers now")
    return followers[ref.index - 1]

"""Node references in scenario scripts: a host named directly (`n2`, or a
role host of the system such as the replica's `ctl`), a role host by its
role (`the controller`), a key role resolved at the moment the step runs
(`leader of key 0`, `a follower of key 0`, `follower 2 of key 0`), or a name
bound by an earlier step (`as: A`, `bind: {A: ...}`).

Key roles are resolved against the system's authority (LogClient.metadata:
leaders and replica assignment by node name), so `a follower of key 0` is the
first replica of key 0 in assignment order that is not its leader.
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
    kind: str  # node | alias | leader | follower
    name: str | None = None  # node or alias name
    key: int = 0
    index: int = 1  # follower index, 1-based

    def text(self) -> str:
        if self.kind in ("node", "alias"):
            return self.name
        if self.kind == "leader":
            return f"leader of key {self.key}"
        return f"follower {self.index} of key {self.key}"


_LEADER = re.compile(r"^(?:the\s+)?leader\s+of\s+key\s+(\d+)$")
_FOLLOWER = re.compile(r"^(?:(?:a|the)\s+follower|follower\s+(\d+))\s+of\s+key\s+(\d+)$")
_NODE = re.compile(r"^n(\d+)$")


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
    if t in bound:
        return Ref("alias", t)
    if re.match(r"^[A-Za-z_]\w*$", t):
        raise RefError(f"unknown node {t!r}: not a host ({layout.describe()}) and not bound by an "
                       f"earlier step (`as: {t}` or `bind`)")
    roles = "".join(f", the {r}" for r in layout.roles)
    raise RefError(f"bad node reference {t!r}: use {layout.describe()}{roles}, leader of key K, "
                   f"a follower of key K, follower I of key K, or a name bound earlier")


def _key(key: int, layout: Layout) -> int:
    if key >= layout.keys:
        raise RefError(f"key {key} does not exist (keys 0..{layout.keys - 1})")
    return key


def resolve(ref: Ref, metadata: dict[int, dict], aliases: dict[str, str]) -> str:
    """The host name a reference means now. metadata: the authority's
    {key: {"leader": node, "replicas": [nodes], ...}} (KeyMeta.as_json)."""
    if ref.kind == "node":
        return ref.name
    if ref.kind == "alias":
        return aliases[ref.name]
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

"""Replication events from the nodes' own logs, on the report's time axis.

The brokers say when they became leader (with epoch and LEO), when they
truncated and to where, and when they recovered after a restart; the
controller says why it elected a leader.  These are the events that remove or
replace an acknowledged write, so the anomaly stories are told with them.
A log line this module does not know is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .clock import RunClock

# "2026-11-23T13:50:19.744Z broker-2 broker 2: log-0: truncated from leo 5 to 3"
_LINE = re.compile(r"^(\S+) \S+ (?:broker (\d+)|controller): (\S+?)-(\d+): (.*)$")
_LEADER = re.compile(r"^leader in epoch (\d+) at leo (\d+) hw (\d+)")
_FOLLOWER = re.compile(r"^follower of (\d+) in epoch (\d+) at leo (\d+) hw (\d+)")
_TRUNCATED = re.compile(r"^truncated from leo (\d+) to (\d+)")
_ELECTED = re.compile(r"^leader (\S+) epoch (\d+) isr \[([\d, ]*)\](.*)$")
_ALTER_ISR = re.compile(r"^AlterIsr by (\d+): \[([\d, ]*)\] -> \[([\d, ]*)\]")
_RECOVERED = re.compile(r"^(\S+) \S+ broker (\d+): recovered (\S+?)-(\d+): leo=(\d+) hw=(\d+)")


@dataclass(frozen=True)
class NodeEvent:
    """One replication event of one key: kind is leader | follower | truncate | elect | recover | isr
    (the controller applied an ISR change: `isr` the new set, `added` who joined it)."""

    t: float | None  # seconds since the run's start
    node: str
    key: int
    kind: str
    epoch: int | None = None
    leo: int | None = None  # the LEO before a truncation, or at leadership/recovery
    to: int | None = None  # a truncation's new LEO
    leader: str | None = None
    text: str = ""
    isr: tuple[str, ...] = ()
    added: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind == "isr":
            return f"controller put {', '.join(self.added)} in the ISR [{', '.join(self.isr)}]" + \
                (f" ({self.text})" if self.text else "")
        if self.kind == "truncate":
            if self.leo is None:
                return f"{self.node} truncated its log to {self.to}" + (f" ({self.text})" if self.text else "")
            return f"{self.node} truncated its log from {self.leo} to {self.to}"
        if self.kind == "leader":
            return f"{self.node} became leader in epoch {self.epoch} with LEO {self.leo}"
        if self.kind == "elect":
            return f"controller elected {self.leader} in epoch {self.epoch}{self.text}"
        if self.kind == "recover":
            return f"{self.node} restarted with LEO {self.leo}, checkpointed HW {self.to}"
        return f"{self.node} became follower in epoch {self.epoch} at LEO {self.leo}"


def _parse(node: str, line: str, clock: RunClock) -> NodeEvent | None:
    if m := _RECOVERED.match(line):
        return NodeEvent(clock.from_wall(m.group(1)), node, int(m.group(4)), "recover",
                         leo=int(m.group(5)), to=int(m.group(6)))
    m = _LINE.match(line)
    if m is None:
        return None
    t, key, text = clock.from_wall(m.group(1)), int(m.group(4)), m.group(5)
    if node == "ctl":
        if e := _ALTER_ISR.match(text):
            old, new = _ids(e.group(2)), _ids(e.group(3))
            return NodeEvent(t, node, key, "isr", leader=_node(e.group(1)), isr=new,
                             added=tuple(n for n in new if n not in old),
                             text=f"AlterIsr by {_node(e.group(1))}, was [{', '.join(old)}]")
        if e := _ELECTED.match(text):
            reason = e.group(4).strip()
            return NodeEvent(t, node, key, "elect", epoch=int(e.group(2)), leader=_node(e.group(1)),
                             text=f" ({reason})" if reason else "")
        return None
    if e := _TRUNCATED.match(text):
        return NodeEvent(t, node, key, "truncate", leo=int(e.group(1)), to=int(e.group(2)))
    if e := _LEADER.match(text):
        return NodeEvent(t, node, key, "leader", epoch=int(e.group(1)), leo=int(e.group(2)), leader=node)
    if e := _FOLLOWER.match(text):
        return NodeEvent(t, node, key, "follower", epoch=int(e.group(2)), leo=int(e.group(3)),
                         leader=f"n{e.group(1)}")
    return None


def _system_reader(store_dir: Path):
    """The store's system's event reader (test.json names the system), if it has one."""
    import json

    from harness import registry

    try:
        name = json.loads((store_dir / "test.json").read_text()).get("system")
        return getattr(registry.system(name), "node_events", None) if name else None
    except (OSError, ValueError, registry.RegistryError):
        return None


def _ids(text: str) -> tuple[str, ...]:
    return tuple(_node(x.strip()) for x in text.split(",") if x.strip())


def _node(broker: str) -> str:
    return f"n{broker}" if broker.isdigit() else broker


def read_node_events(store_dir: Path, clock: RunClock) -> list[NodeEvent]:
    """Every event of the nodes' logs, in time order: through the system's own
    reader (System.node_events) when it has one, else the replica's
    ``nodes/*/broker.log`` and ``nodes/ctl/controller.log``."""
    events: list[NodeEvent] = []
    nodes = store_dir / "nodes"
    if not nodes.is_dir():
        return events
    reader = _system_reader(store_dir)
    if reader is not None:
        for d in reader(nodes):
            events.append(NodeEvent(clock.from_wall(d["time"]), d["node"], int(d["key"]), d["kind"],
                                    epoch=d.get("epoch"), leo=d.get("leo"), to=d.get("to"),
                                    leader=d.get("leader"), text=d.get("text", ""),
                                    isr=tuple(d.get("isr") or ()), added=tuple(d.get("added") or ())))
        events.sort(key=lambda e: (e.t is None, e.t or 0.0))
        return events
    for node_dir in sorted(p for p in nodes.iterdir() if p.is_dir()):
        for name in ("broker.log", "controller.log"):
            path = node_dir / name
            if not path.is_file():
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if ": " in line and (ev := _parse(node_dir.name, line.rstrip("\n"), clock)):
                        events.append(ev)
    events.sort(key=lambda e: (e.t is None, e.t or 0.0))
    return events

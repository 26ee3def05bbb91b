"""Truncations and ISR changes from a Kafka broker's log (kafka.log), as the
harness.sut.Inspector.events dicts the reports and scenario checks read.

The lines (Kafka 4.x: kafka.cluster.Partition, ReplicaManager, the fetcher
and UnifiedLog), each after the log4j2 ISO-8601 time `[2026-11-26T19:53:36,114]`:
  [Broker id=2] Leader log-0 with topic id ... starts at leader epoch 3 from offset 196 ..., ISR [2], ...
  [Partition log-0 broker=2] ISR updated to 2,1  and version updated to 11
  [Partition log-0 broker=1] Shrinking ISR from 1,2,3 to 1,2. Leader: (highWatermark: 10, endOffset: 12). ...
  [Partition log-0 broker=1] Expanding ISR from 1,2 to 1,2,3
  [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Truncating partition log-0 with
      TruncationState(offset=5, completed=true) due to <reason>
  [UnifiedLog partition=log-0, dir=...] Truncating to offset 5
  [UnifiedLog partition=log-0, dir=...] Truncating to 0 has no effect as the largest offset in the log is -1
In KRaft the controller decides every ISR change (a fenced broker leaves
every ISR at once, without its leaders logging it), and logs each at DEBUG
(systems/kafka/config.py turns that on):
  [QuorumController id=100] partition change for log-0 with topic ID ...: isr: [2, 3, 1] -> [3, 1],
      leader: 2 -> 3, leaderEpoch: 0 -> 1, elr: [] -> [2], partitionEpoch: 2 -> 3
  [QuorumController id=100] UNCLEAN partition change for log-0 ...: isr: [] -> [1], leader: -1 -> 1, ...
Those are the ISR events (`controller_events`), each given to the node that
leads after the change (before it, when the partition is left leaderless);
the brokers' own ISR lines are read only when no controller log says more
(`log_events`, for logs without the DEBUG lines). A fetcher's truncation is an
event only if the log then removed something (a "has no effect" line cancels it).

ZooKeeper era (0.10.2, 0.11.0, 2.8; log4j 1.x, same time format): the
leader's own ISR lines
  Partition [log,0] on broker 1: Shrinking ISR for partition [log,0] from 1,2 to 1        (0.10.2)
  Partition [log,0] on broker 1: Expanding ISR for partition log-0 from 1 to 1,2          (0.10.2)
  [Partition log-0 broker=1] Shrinking ISR from 1,2 to 1. Leader: (highWatermark: ...)    (2.x, as 4.x)
truncations
  Truncating log log-0 to offset 3. (kafka.log.Log)                                       (0.10.2)
  Truncating log-0 to 3 (kafka.log.Log), "Truncating log-0 to 0 has no effect ..." (nothing removed) (0.11)
  [Log partition=log-0, dir=...] Truncating to offset 3                                   (2.x)
  [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Truncating partition log-0 to local high watermark 0 (2.x)
  Replica 1 for partition log-0 reset its fetch offset from 5 to current leader 2's latest offset 3
and the halt of a follower ahead of its new leader with unclean election off (0.10.2)
  Exiting because log truncation is not allowed for partition log-0, Current leader 2's latest offset 3
      is less than replica 1's latest offset 5
and, on the controller broker of the `zk` host (nodes/zk/controller.log), the elections
  [Controller 100]: New leader and ISR for partition [log,0] is {"leader":1,"leader_epoch":1,"isr":[1]}
  [OfflinePartitionLeaderSelector]: Selected new leader and ISR {"leader":2,"leader_epoch":2,"isr":[2]}
      for offline partition [log,0]    (after "No broker in ISR is alive ...": unclean)
"""
from __future__ import annotations

import json
import re
from pathlib import Path

TOPIC = "log"
_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[,.]\d+Z?)\]")
_LEADER = re.compile(r"\[Broker id=\d+\] Leader " + TOPIC + r"-(\d+) with topic id .*? starts at leader epoch (\d+) "
                     r"from offset (\d+).*?, ISR \[([\d, ]*)\]")
_UPDATED = re.compile(r"\[Partition " + TOPIC + r"-(\d+) broker=\d+\] ISR updated to ([\d,]*)")
_SHRINK = re.compile(r"\[Partition " + TOPIC + r"-(\d+) broker=\d+\] Shrinking ISR from ([\d,]*) to ([\d,]*)"
                     r"(?:\. Leader: \(highWatermark: (\d+), endOffset: (\d+)\))?")
_EXPAND = re.compile(r"\[Partition " + TOPIC + r"-(\d+) broker=\d+\] Expanding ISR from ([\d,]*) to ([\d,]*)")
_FETCHER = re.compile(r"Truncating partition " + TOPIC + r"-(\d+) with TruncationState\(offset=(\d+).*?\) due to "
                      r"(.*?)(?: \([\w.$]+\))?$")
_ZK_SHRINK = re.compile(r"Partition \[" + TOPIC + r",(\d+)\] on broker \d+: Shrinking ISR (?:for partition \S+ )?"
                        r"from ([\d,]*) to ([\d,]*)")
_ZK_EXPAND = re.compile(r"Partition \[" + TOPIC + r",(\d+)\] on broker \d+: Expanding ISR (?:for partition \S+ )?"
                        r"from ([\d,]*) to ([\d,]*)")
_ZK_LOG = re.compile(r"Truncating (?:log )?" + TOPIC + r"-(\d+) to (?:offset )?(\d+)(?:\.| has no effect)")
_ZK_RESET = re.compile(r"Replica \d+ for partition " + TOPIC + r"-(\d+) reset its fetch offset from (\d+) to current "
                       r"leader \d+'s latest offset (\d+)")
_HW_FETCHER = re.compile(r"Truncating partition " + TOPIC + r"-(\d+) to local high watermark (\d+)")   # 2.x
_ZK_HALT = re.compile(r"Exiting because log truncation is not allowed for partition " + TOPIC + r"-(\d+), Current "
                      r"leader (\d+)'s latest offset (\d+) is less than replica (\d+)'s latest offset (\d+)")
_LOG = re.compile(r"\[(?:Unified)?Log partition=" + TOPIC + r"-(\d+), dir=[^\]]*\] Truncating to (?:offset )?(\d+)"
                  r"(?: has no effect as the largest offset in the log is (-?\d+))?")


def _nodes(text: str) -> list[str]:
    return [f"n{x}" for x in re.split(r"[,\s]+", text.strip()) if x]


class _Reader:
    def __init__(self, node: str):
        self.node = node
        self.isr: dict[int, list[str]] = {}
        self.pending: dict[int, dict] = {}   # a fetcher's truncation waiting for the log's own line
        self.out: list[dict] = []

    def event(self, time: str, key: int, kind: str, **fields) -> dict:
        ev = {"time": time, "node": self.node, "key": key, "event": kind, **fields}
        self.out.append(ev)
        return ev

    def isr_now(self, time: str, key: int, new: list[str], **fields) -> None:
        old = self.isr.get(key)
        self.isr[key] = new
        if old is None or set(old) == set(new):
            return
        gone = [n for n in old if n not in new]
        added = [n for n in new if n not in old]
        if gone:
            self.event(time, key, "isr-shrink", isr=new, out=gone, **fields)
        for n in added:
            self.event(time, key, "isr-expand", isr=new, replica=n, leo=None, hw=None)

    def line(self, line: str) -> None:
        m = _TIME.match(line)
        if not m or ((TOPIC + "-") not in line and ("[" + TOPIC + ",") not in line):
            return
        time = m.group(1).replace(" ", "T").replace(",", ".")
        if (x := _ZK_HALT.search(line)):
            self.event(time, int(x.group(1)), "halt", leader=f"n{x.group(2)}", leader_leo=int(x.group(3)),
                       leo=int(x.group(5)), reason="log truncation is not allowed (unclean.leader.election.enable=false)")
            return
        if "ISR" in line:
            if (x := _ZK_SHRINK.search(line)):
                self.isr[int(x.group(1))] = _nodes(x.group(2))
                self.isr_now(time, int(x.group(1)), _nodes(x.group(3)))
            elif (x := _ZK_EXPAND.search(line)):
                self.isr[int(x.group(1))] = _nodes(x.group(2))
                self.isr_now(time, int(x.group(1)), _nodes(x.group(3)))
            elif (x := _SHRINK.search(line)):
                extra = {} if x.group(4) is None else {"hw": int(x.group(4)), "leo": int(x.group(5))}
                self.isr[int(x.group(1))] = _nodes(x.group(2))
                self.isr_now(time, int(x.group(1)), _nodes(x.group(3)), **extra)
            elif (x := _EXPAND.search(line)):
                self.isr[int(x.group(1))] = _nodes(x.group(2))
                self.isr_now(time, int(x.group(1)), _nodes(x.group(3)))
            elif (x := _UPDATED.search(line)):
                self.isr_now(time, int(x.group(1)), _nodes(x.group(2)))
            elif (x := _LEADER.search(line)):
                self.isr_now(time, int(x.group(1)), _nodes(x.group(4)))
            return
        if (x := _ZK_RESET.search(line)):
            key = int(x.group(1))
            self.pending[key] = self.event(time, key, "truncate", **{"from": int(x.group(2))}, to=int(x.group(3)),
                                           reason="fetch offset out of range: reset to the leader's log end")
            return
        if "Truncating" not in line:
            return
        if (x := _ZK_LOG.search(line)):
            key, to = int(x.group(1)), int(x.group(2))
            fetcher = self.pending.pop(key, None)
            if fetcher is None and "has no effect" not in line:
                self.event(time, key, "truncate", **{"from": None}, to=to)
            return
        if (x := _HW_FETCHER.search(line)):
            key = int(x.group(1))
            self.pending[key] = self.event(time, key, "truncate", **{"from": None}, to=int(x.group(2)),
                                           reason="local high watermark")
            return
        if (x := _FETCHER.search(line)):
            key = int(x.group(1))
            self.pending[key] = self.event(time, key, "truncate", **{"from": None}, to=int(x.group(2)),
                                           reason=x.group(3).strip())
        elif (x := _LOG.search(line)):
            key, to = int(x.group(1)), int(x.group(2))
            fetcher = self.pending.pop(key, None)
            if x.group(3) is not None:          # nothing removed
                if fetcher is not None:
                    self.out.remove(fetcher)
            elif fetcher is None:
                self.event(time, key, "truncate", **{"from": None}, to=to)


def log_events(path: Path, node: str, isr: bool = True) -> list[dict]:
    """Events of one broker's log, in file order (`isr`: its own ISR lines too)."""
    if not path.is_file():
        return []
    reader = _Reader(node)
    for line in path.read_text(errors="replace").splitlines():
        if isr or "ISR" not in line:
            reader.line(line)
    return reader.out


_CHANGE = re.compile(r"(UNCLEAN )?partition change for " + TOPIC + r"-(\d+) with topic ID \S+: (.*?)(?: \([\w.$]+\))?$")
_FIELD = re.compile(r"(\w+): (\[[\d, ]*\]|-?\d+|\w+) -> (\[[\d, ]*\]|-?\d+|\w+)")


def _ids(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


_NEW = re.compile(r"Replayed PartitionRecord for new partition " + TOPIC + r"-(\d+) .*?[(,] ?leader=(-?\d+)")


def controller_events(paths: list[Path]) -> list[dict]:
    """ISR changes the KRaft controller made, from the logs that hold its lines
    (the controller host's, or every node's in a combined quorum), once each,
    in time order. Each event names `node`: the leader after the change, or
    before it when the partition is left without one."""
    lines: set[tuple[str, str]] = set()
    for path in paths:
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if TOPIC + "-" in line and ("partition change for " in line or "for new partition " in line):
                    m = _TIME.match(line)
                    if m:
                        lines.add((m.group(1).replace(" ", "T").replace(",", "."), line))
    leader_of: dict[int, int] = {}
    out: list[dict] = []
    for time, line in sorted(lines):
        if (n := _NEW.search(line)):
            leader_of[int(n.group(1))] = int(n.group(2))
            continue
        c = _CHANGE.search(line)
        if not c:
            continue
        key = int(c.group(2))
        fields = {f.group(1): (f.group(2), f.group(3)) for f in _FIELD.finditer(c.group(3))}
        before = leader_of.get(key, -1)
        if "leader" in fields:
            before, leader_of[key] = int(fields["leader"][0]), int(fields["leader"][1])
        if "isr" not in fields:
            continue
        after = leader_of.get(key, -1)
        leader = after if after >= 0 else before
        old, new = (_nodes(",".join(map(str, _ids(x)))) for x in fields["isr"])
        base = {"time": time, "node": f"n{leader}" if leader >= 0 else None, "key": key, "isr": new}
        extra = {"unclean": True} if c.group(1) else {}
        if "elr" in fields:
            extra["elr"] = _nodes(",".join(map(str, _ids(fields["elr"][1]))))
        if "leaderEpoch" in fields:
            extra["leader_epoch"] = int(fields["leaderEpoch"][1])
        gone = [n for n in old if n not in new]
        if gone:
            out.append({**base, "event": "isr-shrink", "out": gone, **extra})
        for n in (n for n in new if n not in old):
            out.append({**base, "event": "isr-expand", "replica": n, "leo": None, "hw": None, **extra})
    return out


# -- the report's story: who led, who followed, who truncated, who was elected ---
_BROKER_LEADER = re.compile(r"\[Broker id=(\d+)\] Leader " + TOPIC + r"-(\d+) (?:with topic id .*? )?starts at leader epoch "
                            r"(\d+) from offset (\d+)")
_BROKER_FOLLOWER = re.compile(r"\[Broker id=(\d+)\] Follower " + TOPIC + r"-(\d+) starts at leader epoch (\d+) from "
                              r"offset (\d+) .*?Current leader is (-?\d+)")
_LOADED = re.compile(r"Completed load of Log\(dir=[^,]*/" + TOPIC + r"-(\d+), .*?highWatermark=(\d+), .*?"
                     r"logEndOffset=(\d+)\)")


_ZK_ELECT = re.compile(r"(?:New leader and ISR for partition \[" + TOPIC + r",(\d+)\] is (\{.*?\})|"
                       r"Selected new leader and ISR (\{.*?\}) for offline partition \[" + TOPIC + r",(\d+)\])")
_ZK_UNCLEAN = re.compile(r"No broker in ISR is alive for \[" + TOPIC + r",(\d+)\]")


def zk_controller_events(paths: list[Path]) -> list[dict]:
    """Elections the ZooKeeper-era controller logged (nodes/zk/controller.log), as
    controller_events' dicts: {"time", "node" (the new leader), "key", "event": "isr-change",
    "isr", "leader_epoch", "unclean"}."""
    out: list[dict] = []
    for path in paths:
        unclean: set[int] = set()
        for line in path.read_text(errors="replace").splitlines():
            m = _TIME.match(line)
            if not m:
                continue
            time = m.group(1).replace(" ", "T").replace(",", ".")
            if (x := _ZK_UNCLEAN.search(line)):
                unclean.add(int(x.group(1)))
                continue
            x = _ZK_ELECT.search(line)
            if not x:
                continue
            key = int(x.group(1) if x.group(1) is not None else x.group(4))
            try:
                state = json.loads(x.group(2) or x.group(3))
            except ValueError:
                continue
            lead = state.get("leader", -1)
            out.append({"time": time, "node": f"n{lead}" if lead >= 0 else None, "key": key,
                        "event": "isr-change", "isr": [f"n{b}" for b in state.get("isr", [])],
                        "leader_epoch": state.get("leader_epoch"), "unclean": key in unclean, "elr": []})
            unclean.discard(key)
    return out


def story_events(nodes_dir: Path) -> list[dict]:
    """Replication events of a store's `nodes/*/kafka.log`, for the report's
    stories: {"time", "node", "key", "kind": leader | follower | truncate | elect |
    recover, "epoch", "leo", "to", "leader", "text"} (reports/node_events.py)."""
    out: list[dict] = []
    logs = sorted(nodes_dir.glob("*/kafka.log"))
    for path in logs:
        node = path.parent.name
        for line in path.read_text(errors="replace").splitlines():
            m = _TIME.match(line)
            if not m or (TOPIC + "-") not in line:
                continue
            time = m.group(1).replace(" ", "T").replace(",", ".")
            if (x := _BROKER_LEADER.search(line)):
                out.append({"time": time, "node": node, "key": int(x.group(2)), "kind": "leader",
                            "epoch": int(x.group(3)), "leo": int(x.group(4)), "leader": node})
            elif (x := _BROKER_FOLLOWER.search(line)):
                lead = int(x.group(5))
                out.append({"time": time, "node": node, "key": int(x.group(2)), "kind": "follower",
                            "epoch": int(x.group(3)), "leo": int(x.group(4)),
                            "leader": f"n{lead}" if lead >= 0 else None})
            elif (x := _LOADED.search(line)):
                out.append({"time": time, "node": node, "key": int(x.group(1)), "kind": "recover",
                            "leo": int(x.group(3)), "to": int(x.group(2))})
        for ev in log_events(path, node, isr=False):
            if ev["event"] == "truncate":
                out.append({"time": ev["time"], "node": node, "key": ev["key"], "kind": "truncate",
                            "leo": ev.get("from"), "to": ev["to"], "text": ev.get("reason", "")})
    for ev in controller_events(logs) + zk_controller_events(sorted(nodes_dir.glob("*/controller.log"))):
        if ev.get("leader_epoch") is not None:
            how = "unclean election, " if ev.get("unclean") else ""
            elr = f", ELR [{','.join(ev['elr'])}]" if ev.get("elr") else ""
            out.append({"time": ev["time"], "node": "ctl", "key": ev["key"], "kind": "elect",
                        "epoch": ev["leader_epoch"], "leader": ev["node"],
                        "text": f" ({how}ISR [{','.join(ev['isr'])}]{elr})"})
    out.sort(key=lambda e: e["time"])
    leo: dict[tuple[str, int], int] = {}
    for ev in out:   # a truncation's "from": the LEO the node last reported for the key
        where = (ev["node"], ev["key"])
        if ev["kind"] == "truncate" and ev["leo"] is None and leo.get(where, -1) > ev["to"]:
            ev["leo"] = leo[where]
        if ev.get("leo") is not None:
            leo[where] = ev["to"] if ev["kind"] == "truncate" else ev["leo"]
    return out


# ZooKeeper era: what a broker itself acts as for each partition. The controller's
# metadata names a new leader or follower seconds before the broker has acted on its
# LeaderAndIsr request (and a 0.10.2 follower truncates to its HW only then), so a script
# that waits on the metadata alone races the broker. The broker's own lines say when it
# acted: becoming a follower removes the partition's fetcher and adds one for the new
# leader, becoming the leader removes it (0.10.2, 0.11: `... for partitions log-0`,
# `List([log-0, initOffset 3 to broker ...])`; 2.x: `Set(log-0)`, `Map(log-0 -> ...)`).
_STARTING = re.compile(r"\bstarting \(kafka\.server\.KafkaServer\)")   # 0.10.2: `INFO starting (...)`, 2.x: `[KafkaServer id=2] starting (...)`
_FETCHERS = re.compile(r"\[ReplicaFetcherManager on broker \d+\] (Removed|Added) fetcher")
_PARTITION = re.compile(r"(?<![\w-])" + TOPIC + r"-(\d+)(?!\d)")
# A LeaderAndIsr request is answered (and the broker's metadata then updated by the
# controller) only once the fetcher threads it made idle have stopped: 0.11's
# `[ReplicaFetcherThread-0-1]: Shutting down` ... `Shutdown completed`, 2.x's
# `[ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Shutting down`. A thread blocked
# in a fetch to a dead leader takes up to request.timeout.ms.
_FETCHER_THREAD = re.compile(r"\[(ReplicaFetcherThread-[\d-]+|ReplicaFetcher replicaId=\d+, leaderId=\d+, "
                             r"fetcherId=\d+)\][:,]? (Shutting down|Shutdown completed)")   # 0.10.2: `[ReplicaFetcherThread-0-1], ...`


class ActingRoles:
    """Fed a broker's log as it grows: per key, `follower` once the broker fetches the
    partition from its leader, `stopped` once it removed that fetcher (it leads, or is
    between two roles), nothing since its last start (it has not acted yet)."""

    def __init__(self):
        self.by_key: dict[int, str] = {}
        self.stopping: set[str] = set()   # fetcher threads shutting down (the LeaderAndIsr not answered yet)
        self._rest = ""

    def feed(self, text: str) -> None:
        lines = (self._rest + text).split("\n")
        self._rest = lines.pop()          # an unfinished last line waits for the next read
        for line in lines:
            if _STARTING.search(line):
                self.by_key.clear()
                self.stopping.clear()
            elif (m := _FETCHER_THREAD.search(line)):
                (self.stopping.add if m.group(2) == "Shutting down" else self.stopping.discard)(m.group(1))
            elif (m := _FETCHERS.search(line)):
                state = "follower" if m.group(1) == "Added" else "stopped"
                for key in {int(k) for k in _PARTITION.findall(line)}:
                    self.by_key[key] = state

    def role(self, key: int, named_leader: bool) -> str:
        """The broker's role as it acts: leader only when it stopped fetching, the
        metadata names it (so a broker still acting as the old leader is no leader) and
        no fetcher thread is still stopping (until then its LeaderAndIsr is unanswered and
        its own metadata, which clients ask, still names the old leader)."""
        state = self.by_key.get(key)
        if state == "follower":
            return "follower"
        return "leader" if state == "stopped" and named_leader and not self.stopping else "none"

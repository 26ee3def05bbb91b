"""Fault `disk-loss`: a replaced disk. The node's process is killed, its data
directory is replaced by an empty one prepared as the system needs
(`DB.wipe`: Kafka KRaft formats it again with the run's cluster id, the same
node id and a new directory id; Kafka on ZooKeeper and the replica start on an
empty directory), and its stop (`disk-restart`) starts it again under the same
id. The node comes back with no log: whatever only it held is gone, and
whether the system lets it back into an ISR before it has caught up (KAFKA-14139,
KIP-903) is what the `replaced-disk` scenario asks.

Random schedule: one node (twice as often) or the leader of a key, never more:
operators replace one disk at a time, and losing a majority's disks loses data
on every system. And it waits, as operators do, until no key is under-replicated
(`in_sync_first`: every key's ISR holds all its replicas again, the previous
wiped node caught up) before it replaces the next disk: wiping a node while the
earlier one is still catching up destroys the last copy, a loss no system can
avoid (docs/findings/kafka.md, "the last copy"). Scenario steps: `disk-loss: B`, `disk-restart: B` (`restart:`
also starts it; the final phase restarts whatever is still down).
"""
from __future__ import annotations

from harness.sut import PROCESS, WIPE, require
from nemesis.fault import LEADER, ONE, FaultKind, Target, kill_and_wait, pick, restart_down


class DiskLoss:
    def __init__(self, env):
        self.db = env.db
        self.process = require(env.db, PROCESS, "fault disk-loss")
        require(env.db, WIPE, "fault disk-loss")
        self.stagger = env.interval / 2
        self.log = env.log
        self.victims: list[str] = []

    def choose(self, rng, view):
        spec = rng.choice(DISK_LOSS.targets)
        return Target(pick(spec, view.plan.nodes, rng, view.leader), spec=spec)   # data nodes only

    def aim(self, rng, plan, nodes):
        """The targeted schedule's target: the first of these nodes (one disk at a time)."""
        return Target(list(nodes)[:1], spec="targeted")

    def start(self, target: Target):
        kill_and_wait(self.process, target.nodes)
        wiped = {}
        for n in target.nodes:
            wiped[n] = self.db.wipe(n)
            self.log(f"disk-loss {n}: {wiped[n]}")
        self.victims += [n for n in target.nodes if n not in self.victims]
        return {"nodes": list(target.nodes), "wiped": wiped, "text": "; ".join(_text(n, w) for n, w in wiped.items())}

    def stop(self, target, rng, record):
        self.victims = restart_down(self.process, self.victims, target, rng, self.stagger, record, DISK_LOSS.stop)

    def heal(self) -> None:
        self.victims = []   # the runner restarts every process that is down


def _text(node: str, wiped: dict) -> str:
    """The report's words for one wiped node."""
    out = f"{node} wiped ({wiped.get('files_removed', '?')} files"
    ids = wiped.get("directory_id")
    if isinstance(ids, dict):
        out += f"; directory id {ids.get('old')} -> {ids.get('new')}"
    if wiped.get("registration"):
        out += f"; old registration {wiped['registration']}"
    return out + ")"


DISK_LOSS = FaultKind(name="disk-loss", start="disk-loss", stop="disk-restart", stop_step="disk-restart",
                      colour="#bcbd22", needs=(PROCESS, WIPE), make=DiskLoss, targets=(ONE, ONE, LEADER),
                      in_sync_first=True,
                      description="a replaced disk: kill one node (or a leader), empty its data directory "
                                  "(Kafka KRaft: formatted again, same id, new directory id); disk-restart "
                                  "starts it again; the random schedule waits until every key is fully "
                                  "in sync before it wipes the next node")

"""harness.sut.Inspector for Kafka: what the brokers say, and what they wrote.

- The authority's view (leader, leader epoch, ISR, ELR per key) comes from
  DescribeTopicPartitions (KIP-966), asked once per sampling round and
  shared by the nodes' samples.
- A node answers when its broker answers ApiVersions within the timeout (a
  paused JVM still accepts TCP connections in the kernel, so a connect alone
  would not tell).
- Each replica's own offsets are read from its files, as a broker's replica
  state is not exposed by any API: the log end (LEO) from the tail of the
  active segment (systems/kafka/segments.log_end), the persisted high
  watermark from `replication-offset-checkpoint`, the log start from the
  first segment's base offset. On a network-namespace host these are this
  machine's files (the page cache holds what the broker wrote); on docker and
  ssh hosts the offsets stay unknown (None) rather than cost an SSH command
  per node per second. The leader's HW is the partition's high watermark
  as consumers see it (ListOffsets latest).
- Tiered storage (systems/kafka/tiered.py): each replica's local log start is
  its first local segment, the remote end (one past the last remote offset;
  -1: none) is read from the remote segments in the directory every broker
  shares, and `log_start` is the leader's (ListOffsets earliest: the remote
  tier included). `more_dumps` adds the remote tier as the copy `remote`.
- ZooKeeper era: a replica's role is what the broker acts as (its fetcher lines,
  systems/kafka/events.ActingRoles, read from its growing log), not what the
  controller's metadata already names: 0.10.2-2.x brokers act on a LeaderAndIsr
  request seconds after the metadata changed, and a script must wait for that.
- Events (ISR shrink/expand, truncations) are parsed from the collected
  kafka.log (systems/kafka/events.py).
"""
from __future__ import annotations

import asyncio
import os
import struct
import time
from pathlib import Path

from harness.sut import ReplicaState
from systems.kafka import tiered
from systems.kafka.client import elr, partition_meta
from systems.kafka.events import ActingRoles

CHECKPOINT_FILE = "replication-offset-checkpoint"
TOPIC = "log"
ROUND = 0.5   # s a DescribeTopicPartitions answer serves the samples of one round


async def api_versions(host: str, port: int, timeout: float) -> bool:
    """True if a Kafka broker answers ApiVersions (v0: the smallest request) in time."""
    client_id = b"replog-probe"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(struct.pack(">i", len(body)) + body)
                await writer.drain()
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                corr = struct.unpack(">i", await reader.readexactly(4))[0]
                return size >= 4 and corr == 1
            finally:
                writer.close()
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, struct.error):
        return False


def topic_checkpoint(path: str) -> dict[int, int]:
    """The topic's entries of a Kafka offset checkpoint file, by partition."""
    from systems.kafka.segments import read_offset_checkpoint

    return {p: off for (t, p), off in read_offset_checkpoint(path).items() if t == TOPIC}


class KafkaInspector:
    def __init__(self, db):
        self.db = db
        self._client = None
        self._round: tuple[float, dict[int, dict], dict[int, int]] | None = None
        self._lock = None
        self._starts: dict[int, int] = {}   # the leaders' log start per key (ListOffsets earliest), this round
        self._acting: dict[str, tuple[int, ActingRoles]] = {}   # ZooKeeper era: node -> (bytes read, roles)

    def _kafka(self):
        if self._client is None:
            self._client = self.db.admin_client(request_timeout=2.0)
        return self._client

    async def cluster_view(self) -> tuple[dict[int, dict], dict[int, int]]:
        """(partitions as DescribeTopicPartitions answers them, the leaders' HW per key), cached a round."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._round is not None and time.monotonic() - self._round[0] < ROUND:
                return self._round[1], self._round[2]
            try:
                parts = await asyncio.wait_for(self._kafka().describe(), 2.5)   # its own timeout is 2 s
            except Exception:
                parts = {}
            hws, self._starts = {}, {}
            for key in parts:
                try:
                    self._starts[key], hws[key] = await asyncio.wait_for(self._kafka().watermarks(key), 1.0)
                except Exception:
                    pass
            self._round = (time.monotonic(), parts, hws)
            return parts, hws

    def _local_files(self, node: str) -> bool:
        remote = self.db.cluster.remotes[node]
        return getattr(remote, "netns", None) is not None or type(remote).__name__ == "LocalRemote"

    def _disk_offsets(self, node: str, key: int) -> tuple[int | None, int | None]:
        """(log end, log start) of the node's replica of key, from its files."""
        from systems.kafka import segments

        d = self.db.partition_dir(node, key)
        try:
            bases = sorted(int(f[:-4]) for f in os.listdir(d) if f.endswith(".log") and f[:-4].isdigit())
            return segments.log_end(d), (bases[0] if bases else None)
        except (OSError, ValueError):
            return None, None

    def _acting_roles(self, node: str) -> ActingRoles:
        """The node's ActingRoles, fed what its log gained since the last call."""
        pos, roles = self._acting.get(node, (0, None))
        path = self.db.log_path(node)
        try:
            size = os.path.getsize(path)
            if roles is None or size < pos:          # a new log: read it from the start
                pos, roles = 0, ActingRoles()
            with open(path, "rb") as f:
                f.seek(pos)
                data = f.read()
        except OSError:
            return roles or ActingRoles()
        roles.feed(data.decode(errors="replace"))
        self._acting[node] = (pos + len(data), roles)
        return roles

    async def state(self, node: str, timeout: float = 0.5) -> dict[int, ReplicaState] | None:
        host, port = self.db.address(node)
        if not await api_versions(host, port, timeout):
            return None   # down, paused or cut off
        parts, hws = await self.cluster_view()
        local = self._local_files(node)
        acting = await asyncio.to_thread(self._acting_roles, node) if local and self.db.zk_era else None
        checkpoint = await asyncio.to_thread(self._checkpoint_local, node) if local else {}
        out: dict[int, ReplicaState] = {}
        for key, p in sorted(parts.items()):
            meta = partition_meta(p)
            if node not in meta.replicas:
                continue
            role = "leader" if meta.leader == node else "follower"
            if acting is not None:
                role = acting.role(key, meta.leader == node)
            leo, start = await asyncio.to_thread(self._disk_offsets, node, key) if local else (None, None)
            hw = hws.get(key) if role == "leader" else checkpoint.get(key)
            if hw is not None and leo is not None:
                hw = min(hw, leo)
            tier = {}
            if self.db.tiered:
                # tiered storage: `start` is the first local segment; the log start is the
                # leader's (remote tier included), the remote end the shared directory's
                remote = await asyncio.to_thread(tiered.remote_end, self.db.remote_dir(), TOPIC, key) \
                    if local else None
                tier = {"local_log_start": start, "remote_end": remote}
                start = self._starts.get(key, start)
            out[key] = ReplicaState(key=key, role=role, leader=meta.leader, epoch=meta.epoch, leo=leo, hw=hw,
                                    log_start=start, isr=meta.isr if role == "leader" else (), view=meta.view,
                                    **tier)
        return out

    async def more_dumps(self, timeout: float = 20.0) -> dict[str, dict]:
        """With tiered storage, the remote tier as one more copy (node `remote`): the
        segments in the shared remote directory (systems/kafka/tiered.remote_dump)."""
        if not self.db.tiered:
            return {}
        try:
            dump = await asyncio.wait_for(asyncio.to_thread(tiered.remote_dump, self.db.remote_dir(), TOPIC,
                                                            self.db.keys), timeout)
        except Exception:
            return {}
        return {"remote": dump}

    def elr(self, parts: dict[int, dict]) -> dict[int, tuple[str, ...]]:
        return {k: elr(p) for k, p in parts.items()}

    def _checkpoint_local(self, node: str) -> dict[int, int]:
        try:
            return topic_checkpoint(os.path.join(self.db.data_dir(node), CHECKPOINT_FILE))
        except (OSError, ValueError):
            return {}

    async def dump(self, node: str) -> dict | None:
        return None  # read from the stopped broker's files by KafkaDb.collect

    def checkpoints(self, node: str) -> dict[int, int]:
        """The HW per key the node last wrote to replication-offset-checkpoint."""
        from systems.daemons import read_remote_file

        path = os.path.join(self.db.data_dir(node), CHECKPOINT_FILE)
        return read_remote_file(self.db.cluster.remotes[node], path, topic_checkpoint) or {}

    def events(self, node_dir: Path, node: str) -> list[dict]:
        """The node's truncations (its own log) and the controller's ISR changes
        that name it as the leader (the controller's log, beside it in the store)."""
        from systems.kafka.events import controller_events, log_events

        logs = sorted(node_dir.parent.glob("*/kafka.log"))
        decided = [e for e in controller_events(logs) if e["node"] == node]
        own = log_events(node_dir / "kafka.log", node, isr=not any(controller_events(logs)))
        return sorted(own + decided, key=lambda e: e["time"])

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

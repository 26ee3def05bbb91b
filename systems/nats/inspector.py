"""harness.sut.Inspector for NATS JetStream, as far as JetStream allows.

Per node, the server's monitoring endpoint `/jsz?accounts=true&streams=true`
reports every stream replica the node hosts: its store state (first and last
sequence: the replica's own log start and log end) and the cluster block as
the node sees it (the leader; on the leader, each peer's `current` and lag).
That is normalised per key like the replica's `State`, so the reports'
leader and lag plots work: role leader/follower, leo = last sequence (offset
of the last record + 1), log_start = first sequence - 1, isr = the leader's
current peers plus itself. A JetStream replica writes a message to its store
only when it applies the committed Raft entry, so everything it stores is
committed: hw = leo. JetStream 2.9 exposes no Raft term, so `epoch` is None
(the reports mark a leader change by the leader's name instead).

The metadata group (capability META_GROUP, scenario roles `the metadata
leader`, `metadata follower I`): every server is a peer of JetStream's meta
group, and `/jsz` names the leader the server follows (`meta_cluster.leader`).
A node is the metadata leader when it says so itself and a majority of the
nodes name it; otherwise there is none now.

No live dumps: a running cluster serves reads from the stream leader only
(`allow_direct` gets are answered by whichever replica the queue group
picks), so one chosen replica's contents are read after the run, from its
stopped store (systems/nats/dump.py, called by NatsDb.collect).

The endpoint is read with a 10-line HTTP/1.0 GET over asyncio streams: the
standard library's urllib blocks, and a worker thread would not be inside
the client's network namespace (setns is per thread).
"""
from __future__ import annotations

import asyncio
import json

from harness.sut import ReplicaState
from systems.nats.client import key_meta, key_of
from systems.nats.config import MONITOR_PORT

JSZ = "/jsz?accounts=true&streams=true"
JSZ_META = "/jsz"


async def http_get_json(host: str, port: int, path: str, timeout: float) -> dict:
    """GET http://host:port/path -> parsed JSON body (raises on any problem)."""
    async def get() -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            await writer.drain()
            return await reader.read()
        finally:
            writer.close()
    raw = await asyncio.wait_for(get(), timeout)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        raise OSError(f"{host}:{port}{path}: {status.decode(errors='replace')}")
    return json.loads(body)


def meta_views(reports: dict[str, dict | None]) -> dict[str, str | None]:
    """node -> the metadata leader it names ("" if it names none, None if it did not answer):
    what a set-up that never got its stream placed reports (a server outside the meta group)."""
    return {n: None if r is None else ((r.get("meta_cluster") or {}).get("leader") or "")
            for n, r in reports.items()}


def meta_leader(reports: dict[str, dict | None], nodes: list[str]) -> str | None:
    """The metadata leader from each node's /jsz answer (None: no answer): the
    node that names itself and is named by a majority of all nodes."""
    named = meta_views(reports)
    for node in nodes:
        if named.get(node) == node and sum(1 for v in named.values() if v == node) > len(nodes) // 2:
            return node
    return None


def replica_states(node: str, jsz: dict) -> dict[int, ReplicaState]:
    """The key -> ReplicaState view of one node's /jsz answer."""
    out: dict[int, ReplicaState] = {}
    for account in jsz.get("account_details") or ():
        for stream in account.get("stream_detail") or ():
            key = key_of(stream.get("name", ""))
            if key is None:
                continue
            state = stream.get("state") or {}
            meta = key_meta(stream.get("cluster"))
            role = "leader" if meta.leader == node else ("follower" if meta.leader else "none")
            first, last = state.get("first_seq"), state.get("last_seq")
            out[key] = ReplicaState(
                key=key, role=role, leader=meta.leader, epoch=None,
                leo=None if last is None else int(last),
                hw=None if last is None else int(last),  # stored = committed (see above)
                log_start=None if first is None else max(0, int(first) - 1),
                isr=meta.isr if role == "leader" else ())
    return out


class NatsInspector:
    def __init__(self, db):
        self.db = db

    async def jsz(self, node: str, timeout: float = 1.0) -> dict:
        return await self.jsz_path(node, JSZ, timeout)

    async def jsz_path(self, node: str, path: str, timeout: float = 1.0) -> dict:
        host = self.db.cluster.remotes[node].address
        return await http_get_json(host, MONITOR_PORT, path, timeout)

    async def state(self, node: str, timeout: float = 0.5) -> dict[int, ReplicaState] | None:
        try:
            return replica_states(node, await self.jsz(node, timeout))
        except (OSError, asyncio.TimeoutError, ValueError):
            return None  # down, paused or cut off

    async def meta_group(self, nodes: list[str]) -> dict | None:
        async def report(node):
            try:
                return await self.jsz_path(node, JSZ_META, 1.0)
            except (OSError, asyncio.TimeoutError, ValueError):
                return None  # down, paused or cut off
        answers = await asyncio.gather(*(report(n) for n in nodes))
        reports = dict(zip(nodes, answers))
        if not any(reports.values()):
            return None
        return {"leader": meta_leader(reports, nodes), "members": list(nodes), "views": meta_views(reports)}

    async def dump(self, node: str) -> dict | None:
        return None  # see the module docstring: not a capability of NATS

    def checkpoints(self, node: str) -> dict[int, int]:
        return {}

    def events(self, node_dir, node: str) -> list[dict]:
        return []

    async def more_dumps(self) -> dict[str, dict]:
        return {}   # JetStream keeps no copy besides the servers'

    async def close(self) -> None:
        return None

"""harness.sut.Inspector for the replica: the brokers' debug State and Dump
APIs, the replication-offset-checkpoint files, and the brokers' log lines
(truncations, ISR changes), all normalised to node names and integer keys."""
from __future__ import annotations

import asyncio
import os
import re
import threading
from pathlib import Path

from harness.sut import ReplicaState

TOPIC = "log"
CHECKPOINT_FILE = "replication-offset-checkpoint"
_TRUNCATED = re.compile(r"^(\S+) \S+ broker (\d+): (\S+)-(\d+): truncated from leo (\d+) to (\d+)")
_SHRINK = re.compile(r"^(\S+) \S+ broker (\d+): (\S+)-(\d+): shrinking ISR \[([\d, ]*)\]: \[([\d, ]*)\] out of sync"
                     r"(?: \(caught up \[([-\d, ]*)\] ms ago, previous check (-?\d+) ms ago, "
                     r"replica\.lag\.time\.max\.ms=(\d+)\))?")
_EXPAND = re.compile(r"^(\S+) \S+ broker (\d+): (\S+)-(\d+): expanding ISR \[([\d, ]*)\] with (\d+) "
                     r"\(leo (\d+) >= hw (\d+)\)")


def replica_state(part: dict) -> ReplicaState:
    leader = part.get("leader")
    return ReplicaState(key=int(part["partition"]), role=part.get("role") or "none",
                        leader=None if leader is None else f"n{leader}", epoch=part.get("leader_epoch"),
                        leo=part.get("leo"), hw=part.get("hw"), log_start=part.get("log_start"),
                        isr=tuple(f"n{b}" for b in part.get("isr") or ()),
                        local_log_start=part.get("local_log_start"), remote_end=part.get("remote_end"))


def _daemon_thread(fn, *args) -> asyncio.Future:
    """``fn(*args)`` on a daemon thread: unlike asyncio.to_thread, a call stuck on a
    faulty host cannot hold up the event loop's shutdown after a timeout."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result=None, error=None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def run() -> None:
        try:
            result, error = fn(*args), None
        except Exception as e:  # noqa: BLE001 - handed to the awaiting coroutine
            result, error = None, e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:    # the loop is gone: nobody waits any more
            pass

    threading.Thread(target=run, daemon=True, name="remote-dump").start()
    return future


class ReplicaInspector:
    def __init__(self, db):
        self.db = db
        self._client = None  # made in the event loop that uses it

    def _raw(self):
        if self._client is None:
            from replica import client as rc

            self._client = rc.Client(bootstrap=self.db.endpoints(), request_timeout=1.0)
        return self._client

    async def state(self, node: str, timeout: float = 0.5) -> dict[int, ReplicaState] | None:
        try:
            async with asyncio.timeout(timeout):  # the sampler cancels this: no inner task to wait for
                st = await self._raw().state(self.db.broker_id(node))
        except Exception:
            return None
        return {int(p["partition"]): replica_state(p) for p in st.get("partitions", []) if p.get("topic") == TOPIC}

    async def dump(self, node: str, timeout: float = 10.0) -> dict | None:
        from replica import client as rc

        client = rc.Client(bootstrap=self.db.endpoints(), request_timeout=timeout)
        try:
            async with asyncio.timeout(timeout):
                return await client.dump(self.db.broker_id(node))
        except Exception:
            return None
        finally:
            try:
                async with asyncio.timeout(2.0):
                    await client.close()
            except Exception:
                pass

    async def more_dumps(self, timeout: float = 20.0) -> dict[str, dict]:
        """With tiered storage, the remote tier as one more copy (node `remote`):
        the finished segments of the controller's metadata, read from the store."""
        if not self.db.store:
            return {}
        from replica import client as rc
        from replica.remote_store import StoreClient, remote_dump

        client = rc.Client(bootstrap=self.db.endpoints(), request_timeout=5.0)
        try:
            state = await asyncio.wait_for(client.call(self.db.address(self.db.controller), "State"), 10.0)
            remote = {name: segs for name, segs in (state.get("remote") or {}).items()
                      if name.rpartition("-")[0] == TOPIC}
            store = StoreClient(self.db.address(self.db.store), timeout=5.0)
            dump = await asyncio.wait_for(_daemon_thread(remote_dump, store, remote), timeout)
        except Exception:
            return {}
        finally:
            try:
                await asyncio.wait_for(client.close(), 2.0)
            except Exception:
                pass
        return {"remote": dump}

    def checkpoints(self, node: str) -> dict[int, int]:
        from replica import storage
        from systems.daemons import read_remote_file

        path = os.path.join(self.db.data_dir(node), CHECKPOINT_FILE)
        offsets = read_remote_file(self.db.cluster.remotes[node], path, storage.read_offset_checkpoint,
                                   errors=(storage.StorageError,)) or {}
        return {p: hw for (t, p), hw in offsets.items() if t == TOPIC}

    def events(self, node_dir: Path, node: str) -> list[dict]:
        return log_events(node_dir / "broker.log", node)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                async with asyncio.timeout(2.0):
                    await client.close()
            except Exception:
                pass


def log_events(path: Path, node: str) -> list[dict]:
    """Truncations and ISR changes from one broker's log, in file order."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = _TRUNCATED.match(line)
        if m:
            out.append({"time": m.group(1), "node": node, "key": int(m.group(4)), "event": "truncate",
                        "from": int(m.group(5)), "to": int(m.group(6))})
            continue
        m = _SHRINK.match(line)
        if m:
            ev = {"time": m.group(1), "node": node, "key": int(m.group(4)), "event": "isr-shrink",
                  "isr": _nodes(m.group(5)), "out": _nodes(m.group(6))}
            if m.group(7) is not None:  # the leader's own account (replica/core/broker.py)
                ev.update(caught_up_ms=[int(x) for x in m.group(7).replace(",", " ").split()],
                          check_gap_ms=int(m.group(8)), lag_ms=int(m.group(9)))
            out.append(ev)
            continue
        m = _EXPAND.match(line)
        if m:
            out.append({"time": m.group(1), "node": node, "key": int(m.group(4)), "event": "isr-expand",
                        "isr": _nodes(m.group(5)), "replica": f"n{m.group(6)}",
                        "leo": int(m.group(7)), "hw": int(m.group(8))})
    return out


def _nodes(text: str) -> list[str]:
    return [f"n{x}" for x in text.replace(",", " ").split()]

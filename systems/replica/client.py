"""harness.sut.LogClient over replica/client.py: keys are partitions of one
topic `log`; the replica's errors become the seam's DefiniteError /
IndefiniteError; broker ids become node names (broker i runs on n<i>)."""
from __future__ import annotations

import asyncio

from harness.sut import AbsentError, DefiniteError, IndefiniteError, KeyMeta

TOPIC = "log"
TOPIC_SETTINGS = ("min.insync.replicas", "unclean.leader.election.enable")


def node_name(broker_id) -> str | None:
    return None if broker_id is None else f"n{broker_id}"


def key_meta(m: dict) -> KeyMeta:
    return KeyMeta(leader=node_name(m.get("leader")), epoch=m.get("leader_epoch"),
                   replicas=tuple(f"n{b}" for b in m.get("replicas") or ()),
                   isr=tuple(f"n{b}" for b in m.get("isr") or ()))


def _acks(a: str):
    return a if a == "all" else int(a)


class ReplicaLogClient:
    def __init__(self, bootstrap: list[tuple[str, int]], request_timeout: float = 5.0):
        from replica import client as rc

        self.rc = rc
        self.request_timeout = request_timeout
        self.raw = rc.Client(bootstrap=bootstrap, request_timeout=request_timeout)

    async def _call(self, coro):
        try:
            return await coro
        except self.rc.DefiniteError as e:
            if e.code == "UNKNOWN_TOPIC_OR_PARTITION":  # the controller has no such partition
                raise AbsentError(_text(e)) from e
            raise DefiniteError(_text(e)) from e
        except self.rc.IndefiniteError as e:
            raise IndefiniteError(_text(e)) from e

    async def create(self, keys: int, replication_factor: int, config: dict) -> None:
        topic_config = {k: v for k, v in config.items() if k in TOPIC_SETTINGS}
        try:
            await self._call(self.raw.create_topic(TOPIC, partitions=keys, replication_factor=replication_factor,
                                                   config=topic_config))
        except Exception as e:
            if "EXISTS" not in str(e).upper():
                raise

    async def metadata(self) -> dict[int, KeyMeta]:
        meta = await self._call(self.raw.metadata(TOPIC))
        return {int(k): key_meta(m) for k, m in meta.items()}

    async def send(self, key: int, value, acks: str = "all") -> int:
        return await self._call(self.raw.produce(TOPIC, key, value, acks=_acks(acks)))

    async def poll(self, key: int, offset: int, max_records: int = 1000) -> list[tuple[int, object]]:
        recs, _hw = await self._call(self.raw.fetch(TOPIC, key, offset, max_records=max_records))
        return [(o, v) for o, v in recs]

    async def end_offset(self, key: int) -> int:
        return await self._call(self.raw.list_offsets(TOPIC, key, "latest"))

    async def close(self) -> None:
        try:
            async with asyncio.timeout(2.0):  # also called while its task is being cancelled
                await self.raw.close()
        except Exception:
            pass


def _text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__

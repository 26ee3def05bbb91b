"""The transaction coordinator of a transactional id: the broker leading its
partition of `__transaction_state`, which Kafka picks as
`Utils.abs(transactionalId.hashCode()) % partitions` (TransactionStateManager.
partitionFor; Java's String.hashCode; Utils.abs is Math.abs, 0 for Integer.MIN_VALUE, not
Utils.toPositive's mask: the two differ on every negative hash). FindCoordinator
answers the same; confluent-kafka does not expose it, so the partition is computed
here and its leader read from the metadata (any broker answers, so a paused
coordinator is still named). The targeted nemesis's late-commit-coordinator play
pauses it (nemesis/targeted.py)."""
from __future__ import annotations

import asyncio

TRANSACTION_STATE = "__transaction_state"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit overflow), as a signed int."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(transactional_id: str, partitions: int) -> int:
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class Coordinators:
    """Leaders of __transaction_state, asked through one admin client of the run."""

    def __init__(self, bootstrap: str, names: dict[int, str]):
        self.bootstrap = bootstrap
        self.names = names          # broker id -> node name
        self._admin = None

    def _leaders(self, timeout: float) -> dict[int, int]:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        md = self._admin.list_topics(topic=TRANSACTION_STATE, timeout=timeout)
        topic = md.topics.get(TRANSACTION_STATE)
        if topic is None or topic.error is not None:
            return {}
        return {p: part.leader for p, part in topic.partitions.items()}

    async def of(self, transactional_id: str, timeout: float = 1.0) -> tuple[str | None, dict]:
        """(the node coordinating this id, why), or (None, why) when the metadata does not say."""
        try:
            leaders = await asyncio.wait_for(asyncio.to_thread(self._leaders, timeout), timeout + 1)
        except Exception as e:   # noqa: BLE001 - no answer: the caller falls back
            return None, {"coordinator": f"metadata: {type(e).__name__}"}
        if not leaders:
            return None, {"coordinator": f"no {TRANSACTION_STATE} yet"}
        p = partition_for(transactional_id, len(leaders))
        node = self.names.get(leaders.get(p, -1))
        return node, {"transactional_id": transactional_id, "partition": f"{TRANSACTION_STATE}-{p}",
                      "coordinator": node}

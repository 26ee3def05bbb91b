"""harness.sut.Membership for the replica: its controller's partition reassignment
(replica/protocol.py AlterReassignment), asked over the replica's own wire
protocol; the assignment is read from the controller's Metadata."""
from __future__ import annotations

import asyncio

from systems.replica.client import TOPIC, node_name


class ReplicaMembership:
    def __init__(self, db):
        self.db = db

    async def _call(self, api: str, **fields) -> dict:
        from replica import client as rc

        client = rc.Client(bootstrap=[self.db.address(self.db.controller)], request_timeout=10.0)
        try:
            return await client.call(self.db.address(self.db.controller), api, timeout=10.0, **fields)
        finally:
            await client.close()

    def replicas(self) -> dict[int, list[str]]:
        from replica import protocol as P

        answer = asyncio.run(self._call(P.METADATA, topic=TOPIC))
        parts = (answer.get("topics") or {}).get(TOPIC) or {}
        return {int(k): [node_name(r) for r in v.get("replicas") or []] for k, v in sorted(parts.items())}

    def reassign(self, key: int, nodes: list[str]) -> dict:
        from replica import protocol as P

        answer = asyncio.run(self._call(P.ALTER_REASSIGNMENT, topic=TOPIC, partition=key,
                                        replicas=[self.db.broker_id(n) for n in nodes]))
        if answer.get("error"):
            raise RuntimeError(f"reassignment of key {key} to {nodes}: {answer['error']} {answer.get('message', '')}"
                               .strip())
        return {"replicas": [node_name(r) for r in answer.get("replicas") or []],
                "pending": answer.get("target") is not None}

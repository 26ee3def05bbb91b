"""harness.sut.Membership for Kafka: partition reassignment with KIP-455's
AlterPartitionReassignments (Kafka 2.4 and later; kafka-python's admin client:
confluent-kafka 2.16 has no reassignment call), the assignment from Metadata, and
a retired broker's registration removed (KRaft: UnregisterBroker,
systems/kafka/registration.py; ZooKeeper era: its registration goes with its
session)."""
from __future__ import annotations

from systems.kafka.client import TOPIC


class ReassignmentUnavailable(RuntimeError):
    """This Kafka release has no AlterPartitionReassignments; one line."""


class KafkaMembership:
    def __init__(self, db):
        self.db = db
        version = tuple(int(x) for x in db.options.version.split(".")[:2])
        if version < (2, 4):
            raise ReassignmentUnavailable(
                f"fault membership: Kafka {db.options.version} has no AlterPartitionReassignments (KIP-455, "
                f"Kafka 2.4); use 2.8.2 or 4.x")

    def _admin(self):
        from kafka.admin import KafkaAdminClient

        servers = [f"{h}:{p}" for h, p in self.db.endpoints()]
        return KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=15000, client_id="replog-membership")

    def replicas(self) -> dict[int, list[str]]:
        admin = self._admin()
        try:
            topics = admin.describe_topics([TOPIC])
        finally:
            admin.close()
        # kafka-python 3 names the fields as Metadata's schema does (name, partition_index,
        # replica_nodes); older releases as topic, partition, replicas
        parts = next((t.get("partitions") or [] for t in topics if (t.get("name") or t.get("topic")) == TOPIC), [])
        out = {}
        for p in parts:
            index = p.get("partition_index", p.get("partition"))
            out[int(index)] = [f"n{r}" for r in (p.get("replica_nodes") or p.get("replicas") or [])]
        if not out:
            raise RuntimeError(f"membership: the Metadata answer names no partition of {TOPIC!r}")
        return dict(sorted(out.items()))

    def reassign(self, key: int, nodes: list[str]) -> dict:
        from kafka import TopicPartition

        admin = self._admin()
        try:
            answer = admin.alter_partition_reassignments({TopicPartition(TOPIC, key): [int(n[1:]) for n in nodes]},
                                                         timeout_ms=15000)
        finally:
            admin.close()
        error = answer.get(TopicPartition(TOPIC, key))
        if error is not None:
            name = getattr(error, "__name__", str(error))
            raise RuntimeError(f"reassignment of key {key} to {nodes}: {name}")
        return {"accepted": True}

    def unregister(self, node: str) -> str:
        if self.db.zk_era:
            return "registration ends with its ZooKeeper session"
        return self.db.unregister(node)

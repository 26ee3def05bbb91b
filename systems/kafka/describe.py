"""DescribeTopicPartitions (KIP-966), asked of one broker at a time.

The one Kafka request that answers, per partition, the leader epoch and the
eligible leader replicas (ELR) beside the leader and the ISR. Its encoding
and decoding are kafka-python's protocol classes; the connection is a plain
asyncio one, opened per call with a short timeout, because the inspector
must see a restarted cluster at once: kafka-python's admin client backs off
a failed bootstrap for up to half a minute, and the wait conditions of a
scenario would see "no metadata" all that time.
"""
from __future__ import annotations

import asyncio
import itertools
import struct

from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

VERSION = 0
_corr = itertools.count(1)


async def _ask(host: str, port: int, req, response_class, version: int, timeout: float):
    """One request on a fresh connection, its decoded answer (OSError / TimeoutError on failure)."""
    req.with_header(correlation_id=next(_corr), client_id="replog-inspector")
    frame = req.encode(version=version, header=True, framed=True)
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(frame)
            await writer.drain()
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            body = await reader.readexactly(size)
        finally:
            writer.close()
    return response_class.decode(body, version=version, header=True)


def _topic(resp, topic: str):
    """The answer's entry for topic; LookupError when the broker says it does not exist."""
    for t in resp.topics:
        if t.name == topic:
            if t.error_code:
                raise LookupError(f"topic {topic!r}: error code {t.error_code}")
            return t
    raise LookupError(f"topic {topic!r} not in the answer")


async def describe_partitions(host: str, port: int, topic: str, timeout: float) -> dict[int, dict]:
    """{partition: {leader_id, leader_epoch, replica_nodes, isr_nodes, eligible_leader_replicas,
    last_known_elr, offline_replicas, error_code}} of one topic, as `host` answers it.
    Raises LookupError when the broker says the topic does not exist, OSError/TimeoutError otherwise."""
    req = DescribeTopicPartitionsRequest(topics=[DescribeTopicPartitionsRequest.TopicRequest(name=topic)],
                                         response_partition_limit=2000, cursor=None)
    resp = await _ask(host, port, req, DescribeTopicPartitionsResponse, VERSION, timeout)
    return {int(p.partition_index): {
        "error_code": p.error_code, "leader_id": p.leader_id, "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replica_nodes), "isr_nodes": list(p.isr_nodes),
        "eligible_leader_replicas": list(p.eligible_leader_replicas or ()),
        "last_known_elr": list(p.last_known_elr or ()), "offline_replicas": list(p.offline_replicas or ()),
    } for p in _topic(resp, topic).partitions}


def metadata_version(kafka_version: str) -> int:
    """The Metadata request version asked of a ZooKeeper-era broker: v7 (Kafka 2.1+,
    KIP-320) carries the leader epoch; 0.10.2 and 0.11.0 answer v1 (0.10.0+) without one."""
    line = tuple(int(x) for x in kafka_version.split(".")[:2])
    return 7 if line >= (2, 1) else 1


async def metadata_partitions(host: str, port: int, topic: str, timeout: float, version: int = 1) -> dict[int, dict]:
    """The same shape as describe_partitions, from the Metadata API (the brokers
    before DescribeTopicPartitions: 0.10.2, 0.11.0, 2.x): leader_epoch is None
    below v7 (the broker does not say it), and there is no ELR."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                          allow_auto_topic_creation=False)
    resp = await _ask(host, port, req, MetadataResponse, version, timeout)
    return {int(p.partition_index): {
        "error_code": p.error_code, "leader_id": p.leader_id,
        "leader_epoch": p.leader_epoch if version >= 7 else None,
        "replica_nodes": list(p.replica_nodes), "isr_nodes": list(p.isr_nodes),
        "eligible_leader_replicas": [], "last_known_elr": [],
        "offline_replicas": list(getattr(p, "offline_replicas", None) or ()),
    } for p in _topic(resp, topic).partitions}

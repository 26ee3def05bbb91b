"""The freshest view of a topic's partitions among several brokers' answers.

Every Kafka broker answers metadata from its own cache. A broker cut off from
the controller keeps its last view (itself as leader, say) while the
controller has fenced it and elected another: the first broker to answer may
be the stalest. So the harness asks every broker at once and keeps, per
partition, the answer that knows most:

1. the highest leader epoch (every election bumps it; KRaft and Metadata v7+);
2. where no answer has an epoch (the ZooKeeper era's Metadata v1, 0.10.2 and
   0.11), the controller broker's answer: leadership is decided there, and the
   other brokers learn it from the controller's UpdateMetadata, later;
3. then the view most brokers share (a broker cut off is usually alone);
4. then the order the brokers were asked in.

DescribeTopicPartitions has no partition epoch, so an ISR change without an
election (same leader epoch) is told apart by 3 and 4 only.

Each kept partition says whose view it is (`view_from`: the broker's node name).
"""
from __future__ import annotations

from collections import Counter


def _shape(p: dict) -> tuple:
    """What two answers must share to be the same view of a partition."""
    return (p.get("leader_id"), p.get("leader_epoch"), tuple(p.get("replica_nodes") or ()),
            tuple(p.get("isr_nodes") or ()))


def freshest(answers: list[tuple[str, dict[int, dict]]], controller: str | None = None) -> dict[int, dict]:
    """{partition: the kept answer + `view_from`} from [(broker name, {partition: answer})],
    given in the order the brokers were asked (not the order they answered)."""
    votes: dict[int, Counter] = {}
    for _, parts in answers:
        for key, p in parts.items():
            votes.setdefault(key, Counter())[_shape(p)] += 1
    out: dict[int, dict] = {}
    best: dict[int, tuple] = {}
    for rank, (name, parts) in enumerate(answers):
        for key, p in parts.items():
            epoch = p.get("leader_epoch")
            from_controller = name == controller
            score = (-1 if epoch is None else epoch, epoch is None and from_controller, votes[key][_shape(p)],
                     from_controller, -rank)
            if key not in best or score > best[key]:
                best[key] = score
                out[key] = {**p, "view_from": name}
    return out

"""Every rule in which the replica's protocol generations (eras) differ, in one
table: one row per era, one column per rule (h11 keeps its protocol rules in
tables the same way). The broker and controller cores read their behaviour from
`rules(era)` and compare no era name anywhere else, so an era's whole difference
from its neighbour is one row against the next, and a new era is one new row.

The rules (docs/DESIGN.md "Protocol generations" names them per era):

- `epoch_cache` (KIP-101): leaders write an entry (epoch, start offset) with the
  first record of a new epoch; every replica keeps the cache, checkpoints it and
  truncates it with the log.
- `truncate_to_hw`: a replica that becomes follower (or restarts) truncates to its
  own HW before fetching. Without it, it does so only when it has no epochs.
- `epoch_lookup`: how a new follower finds its truncation point with
  OffsetsForLeaderEpoch: `NONE` (the leader refuses the request), `SINGLE_ROUND`
  (KIP-101: the leader answers an end offset; the follower truncates to
  min(answer, own LEO)) or `ITERATIVE` (KIP-279: the leader answers the largest
  epoch <= E it knows with its end offset; the follower asks again while its
  own epoch there differs).
- `epoch_fencing` (KIP-320): Fetch, OffsetsForLeaderEpoch and ListOffsets carry
  the sender's current leader epoch; the leader rejects older and newer ones.
- `assign_epoch_at_election` (KAFKA-7415): a new leader writes (new epoch, its
  LEO) into its cache at once, not with its first record.
- `isr_needs_epoch_start` (KAFKA-7128): ISR expansion also needs the follower's
  LEO >= the leader's epoch start offset.
- `bounced_broker_fails` (KIP-380): a broker that registers again while its
  session lives is handled by the controller as a failure plus a start.
- `isr_broker_epochs` (KIP-903, KAFKA-14139): a follower's Fetch carries its broker
  epoch; the leader's AlterIsr carries the broker epoch of each replica it adds, as
  seen in the fetch that made it eligible, and the controller refuses the change
  (INELIGIBLE_REPLICA) when that replica has registered again since (a replaced
  disk: same id, empty log). Without it, a late ISR expansion puts the new
  incarnation, with nothing in its log, into the ISR.
- `replica_lag_time_max_ms`: the default of `replica.lag.time.max.ms` (KIP-537
  raised it to 30000 in Kafka 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum


class EpochLookup(str, Enum):
    """How a new follower finds its truncation point (the `epoch_lookup` rule)."""

    NONE = "none"
    SINGLE_ROUND = "single-round"
    ITERATIVE = "iterative"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class EraRules:
    """One era's row; the docstring of this module says what each rule means."""

    name: str
    kafka: str                         # the Kafka release the era models
    epoch_cache: bool
    truncate_to_hw: bool
    epoch_lookup: EpochLookup
    epoch_fencing: bool
    assign_epoch_at_election: bool
    isr_needs_epoch_start: bool
    bounced_broker_fails: bool
    isr_broker_epochs: bool
    replica_lag_time_max_ms: int


TABLE = (
    #        name      kafka     cache  to_hw  lookup                     fence  assign isr_st bounce isr_be lag_ms
    EraRules("hw",     "0.10.2", False, True,  EpochLookup.NONE,          False, False, False, False, False, 10000),
    EraRules("kip101", "0.11.0", True,  False, EpochLookup.SINGLE_ROUND,  False, False, False, False, False, 10000),
    EraRules("epoch",  "2.6",    True,  False, EpochLookup.ITERATIVE,     True,  True,  True,  True,  True,  30000),
)
ERAS = tuple(row.name for row in TABLE)     # oldest first
RULES = tuple(f.name for f in fields(EraRules) if f.name not in ("name", "kafka"))
_BY_NAME = {row.name: row for row in TABLE}


def rules(era: str) -> EraRules:
    """The row of an era; ValueError for an unknown one."""
    try:
        return _BY_NAME[era]
    except KeyError:
        raise ValueError(f"unknown era {era!r} (use {', '.join(ERAS)})") from None


def differences(older: str, newer: str) -> list[str]:
    """The rules in which two eras differ."""
    a, b = rules(older), rules(newer)
    return [rule for rule in RULES if getattr(a, rule) != getattr(b, rule)]


def render() -> str:
    """The table as text, one line per rule and one column per era."""
    width = max(map(len, RULES))
    lines = [" ".join([" " * width, *(f"{era:>12}" for era in ERAS)])]
    for rule in RULES:
        lines.append(" ".join([f"{rule:<{width}}", *(f"{str(getattr(row, rule)):>12}" for row in TABLE)]))
    return "\n".join(lines)

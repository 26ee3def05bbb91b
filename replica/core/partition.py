"""One replica of one partition as the broker core sees it: log, HW, epoch cache,
the controller's view (leader, epoch, ISR, version) and the role-specific state."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice

from ..protocol import record_size
from .epoch_cache import EpochCache


@dataclass
class RemoteReplica:
    """What a leader knows about one follower (Kafka's Replica on the leader)."""
    leo: int = -1                     # unknown until it fetches
    last_caught_up_ms: int | None = None   # None: never caught up
    last_fetch_leader_leo: int = 0
    last_fetch_time_ms: int | None = None


@dataclass
class Partition:
    topic: str
    partition: int
    records: list = field(default_factory=list)   # [(offset, epoch, crc, value)], contiguous
    max_record_bytes: int = 0          # no record of the log is larger (protocol.record_size)
    log_start: int = 0
    hw: int = 0
    epoch_cache: EpochCache = field(default_factory=EpochCache)
    # the controller's view
    replicas: list = field(default_factory=list)
    leader: int | None = None
    leader_epoch: int = -1
    isr: list = field(default_factory=list)
    version: int = -1
    config: dict = field(default_factory=dict)
    role: str = "none"                # leader | follower | none
    # leader state
    remotes: dict = field(default_factory=dict)   # broker id -> RemoteReplica
    leader_epoch_start_offset: int = 0
    pending_isr: list | None = None   # AlterIsr in flight (or unanswered)
    pending_isr_corr: int | None = None
    pending_isr_retry_at: int | None = None
    # follower state
    fetch_state: str = "idle"          # idle | truncating | fetching
    inflight: int | None = None        # corr of the outstanding request to the leader
    retry_at: int | None = None
    # flush state
    flushed_to: int = 0
    first_unflushed_ms: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def leo(self) -> int:
        return self.log_start + len(self.records)

    def read(self, offset: int, limit: int, max_records: int, max_bytes: int | None = None) -> list:
        """Records from ``offset`` below ``limit``, at most ``max_records`` and
        ``max_bytes``, but always the first one (Kafka's KIP-74)."""
        start = offset - self.log_start
        end = min(limit - self.log_start, start + max_records)
        if end <= start:
            return []
        if max_bytes is None or (end - start) * self.max_record_bytes <= max_bytes:
            return self.records[start:end]
        out, total = [], 0
        for r in islice(self.records, start, end):
            total += record_size(r[3])
            if out and total > max_bytes:
                break
            out.append(r)
        return out

    def truncate(self, offset: int) -> bool:
        """Drop records at or above ``offset``; True if anything was dropped."""
        if offset >= self.leo:
            return False
        del self.records[max(0, offset - self.log_start):]
        self.hw = min(self.hw, self.leo)
        self.flushed_to = min(self.flushed_to, self.leo)
        return True

    def state(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "role": self.role,
                "leader": self.leader, "leader_epoch": self.leader_epoch,
                "leo": self.leo, "hw": self.hw, "log_start": self.log_start,
                "isr": list(self.isr), "epoch_cache": self.epoch_cache.as_list()}

    def dump(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "hw": self.hw,
                "leo": self.leo, "log_start": self.log_start,
                "records": [list(r) for r in self.records]}

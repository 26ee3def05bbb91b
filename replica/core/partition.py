"""One replica of one partition as the broker core sees it: log, HW, epoch cache,
the controller's view (leader, epoch, ISR, version) and the role-specific state.

Offsets of a tiered log: ``log_start <= local_start <= hw <= leo``; ``records``
hold ``[local_start, leo)``, the remote tier ``[log_start, remote_end)``
(``remote_end`` is exclusive, -1 when nothing is known to be remote).
``segments`` are the local segments ``[base, bytes, newest_ms]``, oldest first;
the last one is active (never tiered, never deleted)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from itertools import islice

from .. import storage as S
from ..protocol import record_size
from .epoch_cache import EpochCache



class FetchState(str, Enum):
    """Where a follower is in finding its truncation point and fetching (a leader: IDLE)."""

    IDLE = "idle"
    TRUNCATING = "truncating"                        # asking OffsetsForLeaderEpoch
    FETCHING = "fetching"
    BUILDING_AUX = "building_remote_log_aux"         # KIP-405: rebuilding the epoch cache from remote storage

    def __str__(self) -> str:
        return self.value


@dataclass
class RemoteReplica:
    """What a leader knows about one follower (Kafka's Replica on the leader)."""
    leo: int = -1                     # unknown until it fetches
    last_caught_up_ms: int | None = None   # None: never caught up
    last_fetch_leader_leo: int = 0
    last_fetch_time_ms: int | None = None
    broker_epoch: int | None = None   # the follower's broker epoch in its last fetch (KIP-903)


@dataclass
class Partition:
    topic: str
    partition: int
    records: list = field(default_factory=list)   # [(offset, epoch, crc, value)], contiguous
    max_record_bytes: int = 0          # no record of the log is larger (protocol.record_size)
    log_start: int = 0                # first offset of the whole log (remote tier included)
    local_start: int = 0              # first offset of ``records``
    segments: list = field(default_factory=lambda: [[0, 0, 0, 0]])   # [[base, bytes, first_ms, newest_ms]]
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
    pending_isr_epochs: dict | None = None   # broker epochs of the replicas it adds (rule isr_broker_epochs)
    pending_isr_corr: int | None = None
    pending_isr_retry_at: int | None = None
    # follower state
    fetch_state: FetchState = FetchState.IDLE
    inflight: int | None = None        # corr of the outstanding request to the leader
    retry_at: int | None = None
    # tiered storage (replica/core/tiered.py)
    remote: list = field(default_factory=list)   # REMOTE_SEGMENTs known (protocol.py)
    remote_loaded: bool = False       # remote metadata read since this replica took its role
    rlm: dict | None = None           # the remote log manager's operation in flight
    aux: dict | None = None           # BuildingRemoteLogAux: {"elo", "elo_epoch", ...}
    # flush state
    flushed_to: int = 0
    first_unflushed_ms: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def leo(self) -> int:
        return self.local_start + len(self.records)

    @property
    def remote_end(self) -> int:
        """One past the last offset in a finished remote segment (-1: none)."""
        from .. import protocol as P
        ends = [s["end"] + 1 for s in self.remote if s["state"] == P.COPY_SEGMENT_FINISHED]
        return max(ends) if ends else -1

    def read(self, offset: int, limit: int, max_records: int, max_bytes: int | None = None) -> list:
        """Records from ``offset`` below ``limit``, at most ``max_records`` and
        ``max_bytes``, but always the first one (Kafka's KIP-74)."""
        start = offset - self.local_start
        end = min(limit - self.local_start, start + max_records)
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
        if offset < self.local_start:       # below the local log: it restarts there (Kafka's truncateTo)
            self.records.clear()
            self.local_start = offset
            self.log_start = min(self.log_start, offset)
            self.segments = [[offset, 0, 0, 0]]
        del self.records[max(0, offset - self.local_start):]
        while len(self.segments) > 1 and self.segments[-1][0] >= offset:
            self.segments.pop()
        active = self.segments[-1]
        active[1] = sum(S.RECORD_OVERHEAD + len(S.encode_value(r[3]))
                        for r in self.records[max(0, active[0] - self.local_start):])
        self.hw = min(self.hw, self.leo)
        self.flushed_to = min(self.flushed_to, self.leo)
        return True

    def state(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "role": self.role,
                "leader": self.leader, "leader_epoch": self.leader_epoch,
                "leo": self.leo, "hw": self.hw, "log_start": self.log_start,
                "local_log_start": self.local_start, "remote_end": self.remote_end,
                "fetch_state": str(self.fetch_state),
                "isr": list(self.isr), "epoch_cache": self.epoch_cache.as_list()}

    def dump(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "hw": self.hw,
                "leo": self.leo, "log_start": self.log_start, "local_log_start": self.local_start,
                "remote_end": self.remote_end,
                "records": [list(r) for r in self.records]}

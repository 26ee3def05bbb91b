"""Outputs of the sans-IO cores: what the shell (or the simulator) must do.

A core never touches a socket, a file or the clock. Each input method returns a
list of these actions; the caller carries them out in order. Disk actions come
before the replies that depend on them, so a shell that applies them in order
never acknowledges what it has not written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Destination of a Send: a broker id (int), the controller or the remote object store.
CONTROLLER = "controller"
REMOTE_STORE = "store"


@dataclass(frozen=True, slots=True)
class Send:
    """Send a request to a peer (broker id or CONTROLLER); its answer comes back
    through ``on_response(dest, message, now)``. ``message`` carries api and corr."""
    dest: Any
    message: dict


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer a request that arrived on connection ``conn`` (an opaque handle)."""
    conn: Any
    message: dict


@dataclass(frozen=True, slots=True)
class Append:
    """Append records ``(offset, epoch, crc, value)`` to a partition log (page cache)."""
    topic: str
    partition: int
    records: list


@dataclass(frozen=True, slots=True)
class Truncate:
    """Drop every record at or above ``offset``."""
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Roll:
    """Close the active segment; the next record starts a new one at ``offset`` (the LEO)."""
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ResetLog:
    """Drop every local record and continue the log at ``offset`` (a follower that
    starts at the leader's earliest local offset)."""
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class DeleteSegments:
    """Retention: delete the rolled segments below ``offset`` (a segment boundary);
    the local log then starts at ``offset``."""
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Flush:
    """fsync the partition log."""
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class WriteOffsetCheckpoint:
    """Write a per-log-dir offset checkpoint file (``replication-offset-checkpoint``
    holds HWs). ``offsets`` maps (topic, partition) -> offset."""
    name: str
    offsets: dict


@dataclass(frozen=True, slots=True)
class WriteEpochCheckpoint:
    """Rewrite a partition's ``leader-epoch-checkpoint`` (synchronously, fsynced)."""
    topic: str
    partition: int
    entries: list


@dataclass(frozen=True, slots=True)
class Persist:
    """Controller only: durably store the metadata (its ZooKeeper)."""
    state: dict


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Call ``on_timer(now)`` at time ``at`` (ms). Replaces the previous request."""
    at: int


@dataclass(frozen=True, slots=True)
class Log:
    """One line for the process log."""
    text: str


@dataclass(frozen=True, slots=True)
class Exit:
    """Stop the process with exit code 2: it cannot take part in its cluster
    (e.g. the controller refused its cluster secret)."""
    text: str

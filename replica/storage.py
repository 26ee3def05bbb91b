"""On-disk storage of one broker: partition logs and Kafka-format checkpoint files.

Standard library only (the folder is copied to bare hosts).

A partition log lives in ``<log dir>/<topic>-<partition>/`` as segment files
``<20-digit base offset>.log``. Each record on disk is::

    length  u32 big-endian   number of bytes that follow (16 + len(value))
    offset  i64 big-endian
    epoch   i32 big-endian   leader epoch of the record
    crc     u32 big-endian   zlib.crc32 of the value bytes
    value   JSON text        ``encode_value(value)``

Appends go to the OS page cache with ``os.write``; ``fsync`` happens only as
``flush.messages`` / ``flush.ms`` (or a segment roll, as in Kafka) say, so a
crash of the machine (not of the process) can lose the unflushed tail, which is
exactly what the fault model needs. Opening a log recovers it: the first
record whose length runs past the end of the file, whose CRC does not match,
or whose offset is not the next one ends the log; the file is truncated there
and any later segment deleted.

Checkpoint files use Kafka's text format (line 1 version ``0``, line 2 entry
count, then one entry per line with fields separated by single spaces) and are
replaced atomically: written to ``<file>.tmp``, fsynced, renamed, directory
fsynced.

API summary::

    log = PartitionLog(path, segment_bytes=..., flush_messages=None, flush_ms=None)
    log.append_values(epoch, [v1, v2])      # leader: assigns offsets -> [Record]
    log.append([Record(...), ...])          # follower: records carry offsets
    log.read(offset, max_records)           # -> [Record]
    log.truncate_to(offset); log.truncate_fully_and_start_at(offset)
    log.flush(); log.maybe_flush()          # fsync now / if flush.ms is due
    log.delete_segments_before(offset)      # retention (tiered storage)
    log.leo, log.log_start, log.recovery_point, log.segments()

    write_offset_checkpoint(path, {(topic, partition): offset})
    read_offset_checkpoint(path) -> {(topic, partition): offset}
    write_leader_epoch_checkpoint(path, [(epoch, start_offset), ...])
    read_leader_epoch_checkpoint(path) -> [(epoch, start_offset), ...]

    writer = CheckpointWriter()              # off the event loop, in order, skips unchanged files
    writer.submit(write_offset_checkpoint, path, offsets); writer.close()
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple

__all__ = [
    "Record", "SegmentInfo", "PartitionLog", "StorageError", "CheckpointError",
    "encode_value", "value_crc", "read_segment_file", "segment_file_name",
    "partition_dir_name", "parse_partition_dir_name", "list_partition_dirs",
    "REPLICATION_OFFSET_CHECKPOINT", "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "LEADER_EPOCH_CHECKPOINT", "write_checkpoint", "read_checkpoint",
    "write_offset_checkpoint", "read_offset_checkpoint",
    "write_leader_epoch_checkpoint", "read_leader_epoch_checkpoint", "CheckpointWriter",
    "encode_records", "decode_records", "encode_offset_index", "decode_offset_index",
    "format_checkpoint", "parse_checkpoint", "format_leader_epoch_checkpoint",
    "parse_leader_epoch_checkpoint", "LOG_START_OFFSET_CHECKPOINT",
]

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

SEGMENT_SUFFIX = ".log"
DEFAULT_SEGMENT_BYTES = 1 << 30          # Kafka's segment.bytes default
MAX_RECORD_BYTES = 64 << 20              # a length above this is garbage, not a record

_HEADER = struct.Struct(">IqiI")         # length, offset, epoch, crc
_BODY_FIXED = _HEADER.size - 4           # bytes counted by `length` besides the value
RECORD_OVERHEAD = _HEADER.size           # bytes of a record besides its value
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


class StorageError(Exception):
    """A misuse of the log (non-contiguous append, bad offset) or an unusable directory."""


class CheckpointError(StorageError):
    """A checkpoint file that does not follow Kafka's format; the message names the file and line."""


class Record(NamedTuple):
    """One log record; ``list(record)`` is the ``Dump`` row ``[offset, epoch, crc, value]``."""
    offset: int
    epoch: int
    crc: int
    value: Any


class SegmentInfo(NamedTuple):
    """A segment file and the offsets it holds: ``[base_offset, next_offset)``."""
    base_offset: int
    next_offset: int
    path: str
    size: int


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def encode_value(value: Any) -> bytes:
    """The canonical JSON encoding of a value: the bytes stored on disk and CRC'd.

    Compact separators, sorted keys, ASCII escapes (``json.dumps`` with
    ``separators=(",", ":"), sort_keys=True``). Integers, the workload's values,
    take a fast path with the same result.
    """
    if type(value) is int:
        return str(value).encode("ascii")
    return _ENCODER.encode(value).encode("utf-8")


def value_crc(value: Any) -> int:
    """``zlib.crc32`` of the value's canonical JSON encoding (the record CRC)."""
    return zlib.crc32(encode_value(value))


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """``"log-3"`` -> ``("log", 3)``; raises ValueError for anything else."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return topic, int(part)


def list_partition_dirs(log_dir: str) -> list[tuple[str, int, str]]:
    """Partition directories under a log dir as ``(topic, partition, path)``, sorted."""
    found = []
    if not os.path.isdir(log_dir):
        return found
    for name in os.listdir(log_dir):
        path = os.path.join(log_dir, name)
        if not os.path.isdir(path):
            continue
        try:
            topic, partition = parse_partition_dir_name(name)
        except ValueError:
            continue
        found.append((topic, partition, path))
    return sorted(found)


def _scan(data: bytes, expected_offset: int | None) -> tuple[list[Record], list[int], int]:
    """Parse records from segment bytes; stop at the first torn or corrupt one.

    Returns (records, byte position of each record, number of valid bytes).
    """
    records: list[Record] = []
    positions: list[int] = []
    pos, end = 0, len(data)
    while pos + _HEADER.size <= end:
        length, offset, epoch, crc = _HEADER.unpack_from(data, pos)
        if length < _BODY_FIXED or length > MAX_RECORD_BYTES or pos + 4 + length > end:
            break
        if expected_offset is not None and offset != expected_offset:
            break
        body = data[pos + _HEADER.size: pos + 4 + length]
        if zlib.crc32(body) != crc:
            break
        try:
            value = json.loads(body)
        except ValueError:
            break
        records.append(Record(offset, epoch, crc, value))
        positions.append(pos)
        pos += 4 + length
        expected_offset = offset + 1
    return records, positions, pos


def read_segment_file(path: str) -> list[Record]:
    """All valid records of a segment file (e.g. one copied to remote storage); stops at a torn tail."""
    with open(path, "rb") as f:
        data = f.read()
    return _scan(data, None)[0]


def encode_records(records: Iterable[Record | tuple]) -> bytes:
    """The bytes of a segment file holding ``records`` ``(offset, epoch, crc, value)``
    (what a remote segment object holds: the same format as a local segment)."""
    chunks = []
    for offset, epoch, _crc, value in records:
        body = encode_value(value)
        chunks.append(_HEADER.pack(_BODY_FIXED + len(body), offset, epoch, zlib.crc32(body)))
        chunks.append(body)
    return b"".join(chunks)


def decode_records(data: bytes, base_offset: int | None = None) -> list[Record]:
    """Every record of a whole segment image; unlike recovery, a torn or corrupt
    record is an error (``StorageError``), never a silently shorter log."""
    records, _positions, valid = _scan(data, base_offset)
    if valid != len(data):
        raise StorageError(f"segment image corrupt at byte {valid} of {len(data)} "
                           f"(after {len(records)} records)")
    return records


INDEX_INTERVAL_BYTES = 4096              # Kafka's index.interval.bytes
_INDEX_ENTRY = struct.Struct(">ii")      # relative offset, physical position (Kafka's OffsetIndex)


def encode_offset_index(records: Iterable[Record | tuple], base_offset: int) -> bytes:
    """Kafka's offset index of a segment: one 8-byte entry (offset - base, byte position)
    each time ``INDEX_INTERVAL_BYTES`` more bytes of records have been written."""
    out, pos, since = [], 0, INDEX_INTERVAL_BYTES
    for offset, _epoch, _crc, value in records:
        if since >= INDEX_INTERVAL_BYTES:
            out.append(_INDEX_ENTRY.pack(offset - base_offset, pos))
            since = 0
        size = _HEADER.size + len(encode_value(value))
        pos += size
        since += size
    return b"".join(out)


def decode_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """``[(offset, position)]`` of an offset index; a partial entry is an error."""
    if len(data) % _INDEX_ENTRY.size:
        raise StorageError(f"offset index of {len(data)} bytes is not a whole number of entries")
    return [(base_offset + rel, pos) for rel, pos in _INDEX_ENTRY.iter_unpack(data)]


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class _Segment:
    base_offset: int
    path: str
    fd: int
    size: int = 0
    positions: list[int] = field(default_factory=list)   # byte position of each record


class PartitionLog:
    """The log of one partition replica: segment files plus an in-memory copy of the records.

    Reads are served from memory (the test workloads are small); every change is
    written to the segment files first. Not thread-safe: one asyncio shell owns it.

    Args:
        path: the partition directory (``<log dir>/<topic>-<partition>``), created if missing.
        segment_bytes: roll to a new segment when the active one reaches this size.
        flush_messages: fsync once this many records are unflushed (None: never by count).
        flush_ms: ``maybe_flush()`` fsyncs when the oldest unflushed append is this old (None: never).
        clock: monotonic seconds, for ``flush_ms``.
    """

    def __init__(self, path: str, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 flush_messages: int | None = None, flush_ms: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if segment_bytes <= _HEADER.size:
            raise StorageError(f"segment_bytes must exceed {_HEADER.size}, got {segment_bytes}")
        self.path = path
        self.segment_bytes = segment_bytes
        self.flush_messages = flush_messages
        self.flush_ms = flush_ms
        self._clock = clock
        self._segments: list[_Segment] = []
        self._records: list[Record] = []
        self.log_start = 0
        self.recovery_point = 0
        self.recovered_bytes_dropped = 0     # how much torn/corrupt tail recovery removed
        self._unflushed = 0
        self._first_unflushed_at: float | None = None
        self._dir_dirty = False
        created = not os.path.isdir(path)
        os.makedirs(path, exist_ok=True)
        if created:  # POSIX: the new directory's name is durable only once its parent is fsynced
            _fsync_dir(os.path.dirname(os.path.abspath(path)))
        self._recover()

    # ----------------------------------------------------------------- properties
    @property
    def leo(self) -> int:
        """Log end offset: the offset the next record gets."""
        return self.log_start + len(self._records)

    @property
    def records(self) -> list[Record]:
        """All local records, ``log_start`` to ``leo`` (a copy)."""
        return list(self._records)

    @property
    def last_record(self) -> Record | None:
        return self._records[-1] if self._records else None

    def __len__(self) -> int:
        return len(self._records)

    def segments(self) -> list[SegmentInfo]:
        """Segments, oldest first; all but the last are rolled (closed for appends)."""
        out = []
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else self.leo
            out.append(SegmentInfo(seg.base_offset, nxt, seg.path, seg.size))
        return out

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        bases = sorted(int(m.group(1)) for m in map(_SEGMENT_NAME.match, os.listdir(self.path)) if m)
        for name in os.listdir(self.path):
            if name.endswith(".tmp"):
                os.unlink(os.path.join(self.path, name))
        broken = False
        expected: int | None = None
        for base in bases:
            seg_path = os.path.join(self.path, segment_file_name(base))
            if broken or (expected is not None and base != expected):
                # Everything after a corrupt point (or a gap) is unusable.
                self.recovered_bytes_dropped += os.path.getsize(seg_path)
                os.unlink(seg_path)
                self._dir_dirty = True
                broken = True
                continue
            with open(seg_path, "rb") as f:
                data = f.read()
            records, positions, valid = _scan(data, base)
            if valid < len(data):
                self.recovered_bytes_dropped += len(data) - valid
                broken = True
            fd = os.open(seg_path, os.O_RDWR)
            if valid < len(data):
                os.ftruncate(fd, valid)
                os.fsync(fd)
            os.lseek(fd, valid, os.SEEK_SET)
            if not self._segments:
                self.log_start = base
            self._segments.append(_Segment(base, seg_path, fd, valid, positions))
            self._records.extend(records)
            expected = base + len(records)
        if not self._segments:
            self._new_segment(0)
        self.recovery_point = self.leo
        if self._dir_dirty:
            _fsync_dir(self.path)
            self._dir_dirty = False

    def _new_segment(self, base_offset: int) -> _Segment:
        seg_path = os.path.join(self.path, segment_file_name(base_offset))
        fd = os.open(seg_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg = _Segment(base_offset, seg_path, fd)
        self._segments.append(seg)
        self._dir_dirty = True
        return seg

    # ------------------------------------------------------------------- writing
    def append_values(self, epoch: int, values: Iterable[Any]) -> list[Record]:
        """Leader append: give the values the next offsets, stamped with ``epoch``."""
        start = self.leo
        return self._append_encoded([(start + i, epoch, v) for i, v in enumerate(values)])

    def append(self, records: Iterable[Record | tuple]) -> list[Record]:
        """Follower append of records that carry offsets; they must start at ``leo`` and be contiguous.

        Each item is a ``Record`` or an ``(offset, epoch, crc, value)`` / ``(offset, epoch, value)``
        tuple; the CRC is recomputed from the value (a given CRC that differs is an error).
        """
        items = []
        expected = self.leo
        for rec in records:
            if len(rec) == 4:
                offset, epoch, crc, value = rec
            else:
                (offset, epoch, value), crc = rec, None
            if offset != expected:
                raise StorageError(f"{self.path}: append at offset {offset}, expected {expected}")
            items.append((offset, epoch, value, crc))
            expected += 1
        return self._append_encoded(items)

    def _append_encoded(self, items: list[tuple]) -> list[Record]:
        """Encode every record first (a bad one writes nothing), then one ``os.write``.

        ``items``: ``(offset, epoch, value)`` or ``(offset, epoch, value, expected_crc | None)``.
        The hot path of every produce and follower fetch, hence one loop and no helpers.
        """
        if not items:
            return []
        chunks, appended, sizes = [], [], []
        pack, fixed, crc32 = _HEADER.pack, _BODY_FIXED, zlib.crc32
        for item in items:
            offset, epoch, value = item[0], item[1], item[2]
            body = str(value).encode("ascii") if type(value) is int else encode_value(value)
            crc = crc32(body)
            given = item[3] if len(item) > 3 else None
            if given is not None and crc != given:
                raise StorageError(f"{self.path}: record {offset} has CRC {given}, its value gives {crc}")
            chunks.append(pack(fixed + len(body), offset, epoch, crc))
            chunks.append(body)
            sizes.append(_HEADER.size + len(body))
            appended.append(Record(offset, epoch, crc, value))
        seg = self._segments[-1]
        if seg.size >= self.segment_bytes and seg.positions:
            seg = self._roll()
        pos = seg.size
        positions = seg.positions
        for size in sizes:
            positions.append(pos)
            pos += size
        buf = b"".join(chunks)
        written = os.write(seg.fd, buf)
        if written < len(buf):
            view = memoryview(buf)[written:]
            while view:
                view = view[os.write(seg.fd, view):]
        seg.size = pos
        self._records.extend(appended)
        if self._first_unflushed_at is None:
            self._first_unflushed_at = self._clock()
        self._unflushed += len(appended)
        if self.flush_messages is not None and self._unflushed >= self.flush_messages:
            self.flush()
        return appended

    def roll(self) -> None:
        """Start a new segment at ``leo`` (the core decides when; an empty active segment stays)."""
        if self._segments and self._segments[-1].positions:
            self._roll()
        self._sync_dir()

    def _roll(self) -> _Segment:
        # Kafka flushes the old segment when it rolls (LogManager "flush-log" task).
        self.flush()
        return self._new_segment(self.leo)

    def truncate_to(self, offset: int) -> int:
        """Remove every record at ``offset`` or above; returns how many were removed.

        Truncating below ``log_start`` empties the log and restarts it at ``offset``.
        """
        if offset < self.log_start:
            removed = len(self._records)
            self.truncate_fully_and_start_at(offset)
            return removed
        if offset >= self.leo:
            return 0
        removed = self.leo - offset
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            seg = self._segments.pop()
            os.close(seg.fd)
            os.unlink(seg.path)
            self._dir_dirty = True
        seg = self._segments[-1]
        index = offset - seg.base_offset
        if index < len(seg.positions):
            cut = seg.positions[index]
            del seg.positions[index:]
            os.ftruncate(seg.fd, cut)
            os.lseek(seg.fd, cut, os.SEEK_SET)
            seg.size = cut
        del self._records[offset - self.log_start:]
        self.recovery_point = min(self.recovery_point, offset)
        # A truncation is made durable at once, as Kafka does, so that a
        # crash cannot resurrect records the protocol decided to drop.
        os.fsync(seg.fd)
        self._sync_dir()
        return removed

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every local record and continue the log at ``offset`` (new log start)."""
        for seg in self._segments:
            os.close(seg.fd)
            os.unlink(seg.path)
        self._segments.clear()
        self._records.clear()
        self.log_start = offset
        self._new_segment(offset)
        self.recovery_point = offset
        self._unflushed = 0
        self._first_unflushed_at = None
        self._sync_dir()

    def delete_segments_before(self, offset: int) -> int:
        """Retention: delete whole rolled segments that end at or below ``offset``.

        The active segment is never deleted. Returns the new ``log_start``.
        """
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            seg = self._segments.pop(0)
            os.close(seg.fd)
            os.unlink(seg.path)
            drop = self._segments[0].base_offset - self.log_start
            del self._records[:drop]
            self.log_start = self._segments[0].base_offset
            self._dir_dirty = True
        self._sync_dir()
        self.recovery_point = max(self.recovery_point, self.log_start)
        return self.log_start

    # -------------------------------------------------------------------- flushing
    def flush(self) -> None:
        """fsync every segment with unflushed data (and the directory); advances ``recovery_point``."""
        if self._unflushed or self.recovery_point < self.leo:
            for seg in self._segments:
                if seg.base_offset + len(seg.positions) > self.recovery_point or seg is self._segments[-1]:
                    os.fsync(seg.fd)
        self._sync_dir()
        self.recovery_point = self.leo
        self._unflushed = 0
        self._first_unflushed_at = None

    def maybe_flush(self) -> bool:
        """Flush if ``flush_ms`` has passed since the oldest unflushed append; call it periodically."""
        if self.flush_ms is None or self._first_unflushed_at is None:
            return False
        if (self._clock() - self._first_unflushed_at) * 1000.0 >= self.flush_ms:
            self.flush()
            return True
        return False

    def _sync_dir(self) -> None:
        if self._dir_dirty:
            _fsync_dir(self.path)
            self._dir_dirty = False

    # --------------------------------------------------------------------- reading
    def read(self, offset: int, max_records: int | None = None, max_offset: int | None = None) -> list[Record]:
        """Records from ``offset`` (clamped to ``log_start``) up to ``max_offset`` exclusive and ``max_records``."""
        start = max(offset, self.log_start) - self.log_start
        end = len(self._records) if max_offset is None else max(0, min(max_offset, self.leo) - self.log_start)
        if max_records is not None:
            end = min(end, start + max_records)
        return self._records[start:end] if start < end else []

    def get(self, offset: int) -> Record | None:
        """The record at ``offset``, or None if it is not local."""
        if self.log_start <= offset < self.leo:
            return self._records[offset - self.log_start]
        return None

    def close(self) -> None:
        """Close the files without flushing (a clean shutdown should call ``flush`` first)."""
        for seg in self._segments:
            try:
                os.close(seg.fd)
            except OSError:
                pass
        self._segments = []

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PartitionLog({self.path!r}, log_start={self.log_start}, leo={self.leo})"


# ------------------------------------------------------------------ checkpoint files
CHECKPOINT_VERSION = 0


def format_checkpoint(entries: Iterable[Iterable[Any]], name: str = "checkpoint") -> str:
    """The text of a Kafka checkpoint file: version line, count line, one entry per line."""
    rows = []
    for entry in entries:
        fields = [str(f) for f in entry]
        if not fields or any(not f or any(c.isspace() for c in f) for f in fields):
            raise CheckpointError(f"{name}: entry {fields!r} has an empty field or whitespace in a field")
        rows.append(" ".join(fields))
    return f"{CHECKPOINT_VERSION}\n{len(rows)}\n" + "".join(r + "\n" for r in rows)


def write_checkpoint(path: str, entries: Iterable[Iterable[Any]]) -> None:
    """Atomically replace a checkpoint file: ``<path>.tmp``, fsync, rename, fsync the directory."""
    text = format_checkpoint(entries, path)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_checkpoint(path: str, parsers: tuple[Callable[[str], Any], ...]) -> list[tuple]:
    """Read a checkpoint file; each entry line must have one field per parser.

    A missing file is an empty checkpoint (as in Kafka). Anything malformed
    raises ``CheckpointError`` naming the file, the line and what was expected.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    return parse_checkpoint(raw, parsers, path)


def parse_checkpoint(raw: bytes, parsers: tuple[Callable[[str], Any], ...], path: str = "checkpoint") -> list[tuple]:
    """Parse the bytes of a checkpoint file (``path`` only names it in errors)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: not UTF-8 text ({e})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version line and a count line, found {len(lines)} line(s)")
    if lines[0] != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}:1: unsupported version {lines[0]!r}, expected '{CHECKPOINT_VERSION}'")
    if not lines[1].isdigit():
        raise CheckpointError(f"{path}:2: entry count {lines[1]!r} is not a non-negative integer")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise CheckpointError(f"{path}: header says {count} entries, file has {len(lines) - 2}")
    entries = []
    for lineno, line in enumerate(lines[2:], start=3):
        fields = line.split(" ")
        if len(fields) != len(parsers):
            raise CheckpointError(f"{path}:{lineno}: expected {len(parsers)} space-separated fields, got {line!r}")
        try:
            entries.append(tuple(p(f) for p, f in zip(parsers, fields)))
        except ValueError as e:
            raise CheckpointError(f"{path}:{lineno}: bad field in {line!r}: {e}") from None
    return entries


def _int(text: str) -> int:
    if not re.fullmatch(r"-?\d+", text):
        raise ValueError(f"{text!r} is not an integer")
    return int(text)


def _topic(text: str) -> str:
    if not text:
        raise ValueError("empty topic name")
    return text


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    """``replication-offset-checkpoint`` / ``recovery-point-offset-checkpoint``: ``<topic> <partition> <offset>``."""
    write_checkpoint(path, [(t, p, o) for (t, p), o in sorted(offsets.items())])


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Inverse of ``write_offset_checkpoint``; a duplicate partition is an error."""
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in read_checkpoint(path, (_topic, _int, _int)):
        if (topic, partition) in out:
            raise CheckpointError(f"{path}: partition {topic}-{partition} appears twice")
        out[(topic, partition)] = offset
    return out


def write_leader_epoch_checkpoint(path: str, entries: Iterable[tuple[int, int]]) -> None:
    """``leader-epoch-checkpoint``: ``<epoch> <start_offset>`` per line, in epoch order."""
    write_checkpoint(path, [(int(e), int(o)) for e, o in entries])


def read_leader_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    """Inverse of ``write_leader_epoch_checkpoint``; epochs must increase and offsets not decrease."""
    return _epoch_order(read_checkpoint(path, (_int, _int)), path)


def format_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> bytes:
    """The bytes of a ``leader-epoch-checkpoint`` (also the remote auxiliary state object)."""
    return format_checkpoint([(int(e), int(o)) for e, o in entries], LEADER_EPOCH_CHECKPOINT).encode("utf-8")


def parse_leader_epoch_checkpoint(raw: bytes, name: str = LEADER_EPOCH_CHECKPOINT) -> list[tuple[int, int]]:
    """Inverse of ``format_leader_epoch_checkpoint``; raises CheckpointError on anything malformed."""
    return _epoch_order(parse_checkpoint(raw, (_int, _int), name), name)


def _epoch_order(entries: list, path: str) -> list:
    for (e1, o1), (e2, o2) in zip(entries, entries[1:]):
        if e2 <= e1 or o2 < o1:
            raise CheckpointError(f"{path}: entries ({e1} {o1}) then ({e2} {o2}) are not in epoch order")
    return [tuple(e) for e in entries]


class CheckpointWriter:
    """Writes checkpoint files on one background thread, so their fsyncs do not
    stall the event loop (median 1 ms, up to 30 ms each on a busy disk).

    One thread keeps the writes in submission order, so a file is never
    replaced by an older version and two writes never share ``<file>.tmp``.
    Each write keeps the crash semantics of ``write_checkpoint`` (tmp, fsync,
    rename, fsync dir): a crash leaves the old or the new file. A write whose
    content equals the last one submitted for that path is skipped: the file
    already holds it (or will, once the queue drains). A failed write is
    reported to ``on_error`` and forgotten, so the next one is not skipped.
    """

    def __init__(self, on_error: Callable[[str], None] | None = None):
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        self._last: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._on_error = on_error

    def submit(self, write: Callable[[str, Any], None], path: str, content: Any) -> Future | None:
        """Queue ``write(path, content)``; None if the content is unchanged (nothing to do)."""
        with self._lock:
            if self._last.get(path) == content:
                return None
            self._last[path] = content
        future = self._executor.submit(write, path, content)
        future.add_done_callback(lambda f: self._done(f, path, content))
        return future

    def _done(self, future: Future, path: str, content: Any) -> None:
        error = future.exception()
        if error is None:
            return
        with self._lock:
            if self._last.get(path) == content:
                del self._last[path]
        if self._on_error is not None:
            self._on_error(f"cannot write {path}: {type(error).__name__}: {error}")

    def drain(self) -> None:
        """Wait until every queued write is on disk."""
        self._executor.submit(lambda: None).result()

    def close(self) -> None:
        """Finish the queued writes, then stop the thread."""
        self._executor.shutdown(wait=True)

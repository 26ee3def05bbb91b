"""Read a Kafka replica's log from its segment files, in pure Python.

This module is copied to bare hosts (python3 and nothing else) and run there, so
it imports the standard library only and nothing from the rest of the
repository; it must keep working on older python3 releases too (no `match`,
no walrus, no builtin generics at run time).

A partition directory `<log.dirs>/<topic>-<partition>/` holds segments
`<20-digit base offset>.log` (with `.index`, `.timeindex`, and `.txnindex`
beside them) and a `leader-epoch-checkpoint`; the log directory itself holds
the `replication-offset-checkpoint` (the HW per partition),
`recovery-point-offset-checkpoint` and `log-start-offset-checkpoint`.

A segment is a sequence of record batches, format v2 (magic 2, Kafka >= 0.11;
all big-endian):

    0  baseOffset int64        |  not covered by the CRC: the leader stamps
    8  batchLength int32       |  the partition leader epoch without
    12 partitionLeaderEpoch int32  recomputing it
    16 magic int8 (2)
    17 crc uint32: CRC-32C of bytes 21..end
    21 attributes int16: bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4,
       4 zstd), 3 timestamp type, 4 transactional, 5 control, 6 delete horizon
    23 lastOffsetDelta int32
    27 baseTimestamp int64, 35 maxTimestamp int64
    43 producerId int64, 51 producerEpoch int16, 53 baseSequence int32
    57 records count int32
    61 records (compressed as a whole when the codec is not none)

and a record is: length varint, attributes int8, timestampDelta varlong,
offsetDelta varint, keyLength varint + key, valueLength varint + value,
headers count varint + headers (all varints zigzag; length -1 is null).

Kafka before 0.11 (0.10.2 by default writes magic 1; magic 0 with
message.format.version 0.9.0) writes message sets instead: a sequence of

    0  offset int64, 8 messageSize int32 (the bytes after these 12)
    12 crc uint32: CRC-32 (zlib's) of bytes 16..end
    16 magic int8 (0 or 1), 17 attributes int8: bits 0-2 compression
    18 timestamp int64 (magic 1 only)
       keyLength int32 + key, valueLength int32 + value (-1: null)

A compressed message (a "wrapper") carries a whole message set as its value;
its offset is the last inner message's. Inner offsets are absolute in magic 0
and relative (0..n-1) in magic 1: absolute = wrapper offset - last inner
relative offset + inner relative offset. These messages have no leader epoch:
their records carry epoch -1 (Kafka's NO_PARTITION_LEADER_EPOCH), which is
exactly what 0.10.2's high-watermark replication lacks.

`read_partition` returns every record with its batch's partitionLeaderEpoch, so
the harness's replica diff compares real Kafka replicas offset by offset;
`dump` gives the harness's `Dump` shape (docs/interfaces.md); `log_end` is the
cheap LEO of a running broker's partition (the inspector samples it every
second). Run as a script: `python3 segments.py <log_dir> <topic> [--broker N]`
prints the dump as JSON; `--partition DIR` prints `read_partition(DIR)`;
`--log-end DIR` prints `log_end(DIR)`.
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys
import zlib

__all__ = [
    "SegmentFormatError", "read_partition", "iter_batches", "read_log_dir", "dump", "log_end",
    "segment_files", "read_offset_checkpoint", "read_leader_epoch_checkpoint",
    "read_meta_properties", "crc32c", "value_crc",
]


class SegmentFormatError(ValueError):
    """A segment this reader does not handle."""


# -- CRC-32C -------------------------------------------------------------------
# Record batch v2 checksums with CRC-32C (Castagnoli, reflected polynomial
# 0x82F63B78). The standard library has only zlib.crc32 / binascii.crc32, which
# is CRC-32 with the IEEE polynomial (0xEDB88320): a different checksum. So it is
# computed here from a 256-entry table, plus the 7 derived tables of
# "slicing-by-8" (8 input bytes per loop iteration: about twice as fast in
# CPython on long batches; short tails go byte by byte).
_POLY = 0x82F63B78


def _make_tables():
    t0 = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(p >> 8) ^ t0[p & 0xFF] for p in prev])
    return tuple(tuple(t) for t in tables)


_T = _make_tables()
_II = struct.Struct("<II")


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of `data` (bytes-like), continuing from `crc`."""
    crc ^= 0xFFFFFFFF
    t0, t1, t2, t3, t4, t5, t6, t7 = _T
    n = len(data)
    n8 = n - (n & 7)
    if n8 >= 16:
        for a, b in _II.iter_unpack(data[:n8]):
            a ^= crc
            crc = (t7[a & 0xFF] ^ t6[(a >> 8) & 0xFF] ^ t5[(a >> 16) & 0xFF] ^ t4[a >> 24]
                   ^ t3[b & 0xFF] ^ t2[(b >> 8) & 0xFF] ^ t1[(b >> 16) & 0xFF] ^ t0[b >> 24])
        data = data[n8:]
    for x in data:
        crc = t0[(crc ^ x) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# -- values ----------------------------------------------------------------------
_JSON_INT = re.compile(rb"-?(?:0|[1-9][0-9]{0,17})")


def decode_value(raw):
    """A record value's bytes -> the harness's value: None for a null value,
    else the UTF-8 text, JSON-parsed when it parses (the workload sends integers
    as text); bytes that are not UTF-8 become the string "hex:<hex digits>"."""
    if raw is None:
        return None
    if _JSON_INT.fullmatch(raw):
        return int(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + raw.hex()
    try:
        return json.loads(text)
    except ValueError:
        return text


def value_crc(value) -> int:
    """The harness's record CRC: zlib.crc32 of the value's compact JSON."""
    return zlib.crc32(json.dumps(value, separators=(",", ":")).encode())


_NULL_CRC = zlib.crc32(b"null")


# -- record batches --------------------------------------------------------------
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header
HEADER_SIZE = HEADER.size
LOG_OVERHEAD = 12  # baseOffset + batchLength: batchLength counts the bytes after these
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_PREFIX_LAST = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")
_CTRL_KEY = struct.Struct(">hh")
_LEGACY = struct.Struct(">qiIbb")  # offset, messageSize, crc, magic, attributes
LEGACY_MIN = {0: 14, 1: 22}  # smallest messageSize: crc..value length, plus the v1 timestamp
NO_EPOCH = -1
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


def _varint(buf, pos):
    """Zigzag varint/varlong at pos -> (value, next pos)."""
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _records(data, count, want_key=False):
    """Yield (offsetDelta, key bytes or None, value bytes or None) of `count`
    records in `data` (the uncompressed records section of a batch); the key
    is None unless want_key."""
    pos = 0
    end = len(data)
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = _varint(data, pos)
        nxt = pos + length
        if length < 0 or nxt > end:
            raise ValueError("record length %d runs past the batch" % length)
        pos += 1  # attributes
        if data[pos] < 0x80:  # timestampDelta
            pos += 1
        else:
            _, pos = _varint(data, pos)
        b = data[pos]
        if b < 0x80:
            delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            delta, pos = _varint(data, pos)
        b = data[pos]
        if b < 0x80:
            klen, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            klen, pos = _varint(data, pos)
        key = None
        if klen >= 0:
            if want_key:
                key = bytes(data[pos:pos + klen])
            pos += klen
        b = data[pos]
        if b < 0x80:
            vlen, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            vlen, pos = _varint(data, pos)
        value = bytes(data[pos:pos + vlen]) if vlen >= 0 else None
        # headers follow; the record length lets us skip them
        pos = nxt
        yield delta, key, value


def _append_records(data, count, base, epoch, out):
    """Decode `count` data records of `data` straight into `out` as
    [offset, epoch, crc, value]: _records inlined, for speed (the hot
    loop of read_partition; canonical integer values skip JSON entirely)."""
    pos = 0
    end = len(data)
    crc32 = zlib.crc32
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = _varint(data, pos)
        nxt = pos + length
        if length < 0 or nxt > end:
            raise ValueError("record length %d runs past the batch" % length)
        pos += 1  # attributes
        while data[pos] >= 0x80:  # timestampDelta: skipped
            pos += 1
        b = data[pos + 1]
        if b < 0x80:
            delta, pos = (b >> 1) ^ -(b & 1), pos + 2
        else:
            delta, pos = _varint(data, pos + 1)
        b = data[pos]
        if b < 0x80:
            klen, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            klen, pos = _varint(data, pos)
        if klen > 0:
            pos += klen
        b = data[pos]
        if b < 0x80:
            vlen, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            vlen, pos = _varint(data, pos)
        if vlen < 0:
            out.append([base + delta, epoch, _NULL_CRC, None])
        else:
            raw = data[pos:pos + vlen]
            if vlen < 19 and (raw.isdigit() and (raw[0] != 48 or vlen == 1)
                              or raw[:1] == b"-" and raw[1:].isdigit() and raw[1] != 48):
                # a canonical integer: its compact JSON is its text
                out.append([base + delta, epoch, crc32(raw), int(raw)])
            else:
                value = decode_value(bytes(raw))
                out.append([base + delta, epoch, value_crc(value), value])
        pos = nxt  # headers follow; the record length skips them


def _decompress(codec, data):
    if codec == 1:
        # Kafka's gzip is one GZIPOutputStream stream: wbits 16+ selects the gzip wrapper
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = d.decompress(data)
        out += d.flush()
        return out
    raise ValueError("not supported by this reader (standard library only: none and gzip)")


class _Reader(object):
    """State carried across the segments of one partition."""

    def __init__(self, verify_crc=True, keep_bad=False):
        self.verify_crc = verify_crc
        self.keep_bad = keep_bad
        self.records = []
        self.bad_crc = []
        self.skipped = []  # [first, last, reason]: offsets whose records are not in `records`
        self.notes = []
        self.aborted = []  # [first, last] of transactional batches an ABORT marker ended
        self.open_txn = {}  # producerId -> [[first, last], ...] not yet ended by a marker
        self.txn_batches = []  # [first, last, producerId, producerEpoch, "data" | "commit" | "abort"]
        self.batches = 0
        self.control_batches = 0
        self.last_offset = None  # last offset of the last whole batch seen
        self.torn_tail = False

    def segment(self, path, last):
        """Read one segment file; `last` is True for the partition's last segment."""
        # read, not mmap: a broker truncating the file under an mmap would SIGBUS us
        with open(path, "rb") as f:
            buf = f.read()
        if buf:
            self._scan(buf, len(buf), path, last)

    def _scan(self, buf, size, path, last):
        name = os.path.basename(path)
        pos = 0
        first = True
        while pos < size:
            remaining = size - pos
            if remaining < LOG_OVERHEAD + 5:
                self._tail(buf, pos, size, name, last, "%d bytes, less than a batch header" % remaining)
                return
            base, length, epoch, magic = _PREFIX.unpack_from(buf, pos)
            if length == 0 and base == 0 and not any(buf[pos:pos + 64]):
                self._tail(buf, pos, size, name, last, "zero bytes")
                return
            if magic in (0, 1):
                total = LOG_OVERHEAD + length
                if length < LEGACY_MIN[magic]:
                    self.notes.append("%s: position %d: message size %d is below the v%d minimum: the rest "
                                      "of the segment is unreadable" % (name, pos, length, magic))
                    self.skipped.append([base, None, "corrupt: message size %d at position %d of %s"
                                         % (length, pos, name)])
                    return
                if total > remaining:
                    self._tail(buf, pos, size, name, last, "a partial message at offset %d (%d of %d bytes)"
                               % (base, remaining, total))
                    return
                first = False
                self._message(buf, pos, total, name)
                pos += total
                continue
            if magic != 2:
                self.notes.append("%s: position %d: magic %d is not a record batch v2: the rest of the "
                                  "segment (%d bytes) is unreadable" % (name, pos, magic, remaining))
                self.skipped.append([base, None, "corrupt: magic %d at position %d of %s" % (magic, pos, name)])
                return
            total = LOG_OVERHEAD + length
            if length < HEADER_SIZE - LOG_OVERHEAD:
                self.notes.append("%s: position %d: batch length %d is below the v2 header size: the rest "
                                  "of the segment is unreadable" % (name, pos, length))
                self.skipped.append([base, None, "corrupt: batch length %d at position %d of %s" % (length, pos, name)])
                return
            if total > remaining:
                self._tail(buf, pos, size, name, last, "a partial batch at offset %d (%d of %d bytes)"
                           % (base, remaining, total))
                return
            first = False
            self._batch(buf, pos, total, name)
            pos += total

    def _tail(self, buf, pos, size, name, last, what):
        if last:
            self.torn_tail = True
            self.notes.append("torn tail: %s ends with %s at position %d (%d bytes): read up to there"
                              % (name, what, pos, size - pos))
        else:
            self.notes.append("%s (not the last segment) ends with %s at position %d (%d bytes)"
                              % (name, what, pos, size - pos))

    def _message(self, buf, pos, total, name):
        """One message-format v0/v1 entry (magic 0/1), a compressed wrapper or not."""
        offset = _LEGACY.unpack_from(buf, pos)[0]
        self.batches += 1
        if self.last_offset is not None and offset <= self.last_offset:
            self.notes.append("%s: message at offset %d does not follow offset %d" % (name, offset, self.last_offset))
        self.last_offset = offset if self.last_offset is None else max(self.last_offset, offset)
        try:
            inner = legacy_records(bytes(buf[pos:pos + total]), self.verify_crc)
        except LegacyCrcError as e:
            self.bad_crc.append(offset)
            self.notes.append("%s: CRC-32 mismatch in the message at offset %d (%s)" % (name, offset, e))
            if not self.keep_bad:
                self.skipped.append([offset, offset, "crc mismatch"])
                return
            inner = legacy_records(bytes(buf[pos:pos + total]), False)
        except ValueError as e:
            self.skipped.append([offset, offset, str(e)])
            self.notes.append("%s: message at offset %d skipped: %s" % (name, offset, e))
            return
        for off, value in inner:
            if value is None:
                self.records.append([off, NO_EPOCH, _NULL_CRC, None])
            else:
                v = decode_value(value)
                self.records.append([off, NO_EPOCH, value_crc(v), v])

    def _batch(self, buf, pos, total, name):
        (base, _length, epoch, _magic, crc, attrs, last_delta, _bts, _mts,
         pid, pepoch, _bseq, count) = HEADER.unpack_from(buf, pos)
        last = base + last_delta
        if self.last_offset is not None and base <= self.last_offset:
            self.notes.append("%s: batch at offset %d does not follow offset %d" % (name, base, self.last_offset))
        self.batches += 1
        self.last_offset = last if self.last_offset is None else max(self.last_offset, last)
        if self.verify_crc:
            body = buf[pos + 21:pos + total]
            if crc32c(body) != crc:
                self.bad_crc.append(base)
                self.notes.append("%s: CRC-32C mismatch in the batch at offset %d..%d (stored %d)"
                                  % (name, base, last, crc))
                if not self.keep_bad:
                    self.skipped.append([base, last, "crc mismatch"])
                    return
        control = bool(attrs & ATTR_CONTROL)
        codec = attrs & 7
        data = buf[pos + HEADER_SIZE:pos + total]
        if codec:
            try:
                data = _decompress(codec, data)
            except Exception as e:  # zlib.error, unsupported codec
                what = "compression %s: %s" % (CODECS.get(codec, "codec %d" % codec), e)
                self.skipped.append([base, last, what])
                self.notes.append("%s: batch at offset %d..%d skipped: %s" % (name, base, last, what))
                return
        if control:
            self.control_batches += 1
            try:
                for _delta, key, _value in _records(data, count, True):
                    if key is not None and len(key) >= 4:
                        _version, kind = _CTRL_KEY.unpack_from(key)
                        self.txn_batches.append([base, last, pid, pepoch, "abort" if kind == 0 else "commit"])
                        ranges = self.open_txn.pop(pid, [])
                        if kind == 0:  # ABORT
                            self.aborted.extend(ranges)
            except (IndexError, ValueError) as e:
                self.notes.append("%s: control batch at offset %d: %s" % (name, base, e))
            return
        if attrs & ATTR_TRANSACTIONAL:
            self.open_txn.setdefault(pid, []).append([base, last])
            self.txn_batches.append([base, last, pid, pepoch, "data"])
        out = self.records
        try:
            _append_records(data, count, base, epoch, out)
        except (IndexError, ValueError) as e:
            self.notes.append("%s: batch at offset %d..%d: records unreadable after %s: %s"
                              % (name, base, last, out[-1][0] if out else "none", e))
            self.skipped.append([base, last, "records unreadable: %s" % e])


class LegacyCrcError(ValueError):
    """A v0/v1 message whose stored CRC-32 does not match its bytes."""


def _legacy_bytes(data, pos):
    n = struct.unpack_from(">i", data, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > len(data):
        raise ValueError("a field of %d bytes runs past the message" % n)
    return data[pos:pos + n], pos + n


def _legacy_messages(data, verify_crc):
    """(offset, magic, attributes, key, value) of each whole message of a v0/v1
    message set (a segment's bytes or a wrapper's decompressed value)."""
    pos, n = 0, len(data)
    while pos + LOG_OVERHEAD + 6 <= n:
        offset, size, crc, magic, attrs = _LEGACY.unpack_from(data, pos)
        if magic not in (0, 1):
            raise ValueError("magic %d inside a v0/v1 message set at offset %d" % (magic, offset))
        end = pos + LOG_OVERHEAD + size
        if size < LEGACY_MIN[magic] or end > n:
            break
        if verify_crc and zlib.crc32(data[pos + 16:end]) & 0xFFFFFFFF != crc:
            raise LegacyCrcError("offset %d: stored %d" % (offset, crc))
        at = pos + 18 + (8 if magic == 1 else 0)
        key, at = _legacy_bytes(data, at)
        value, at = _legacy_bytes(data, at)
        yield offset, magic, attrs, key, value
        pos = end


def legacy_records(message, verify_crc=True):
    """[(offset, value bytes or None)] of one v0/v1 message (its 12-byte log
    header included): itself, or the inner messages of a compressed wrapper
    (absolute offsets; see the module's docstring)."""
    (offset, magic, attrs, _key, value), = list(_legacy_messages(message, verify_crc))[:1] or [(None,) * 5]
    if offset is None:
        raise ValueError("no whole v0/v1 message")
    codec = attrs & 7
    if not codec:
        return [(offset, value)]
    if value is None:
        raise ValueError("a compressed message with a null value")
    try:
        inner = list(_legacy_messages(_decompress(codec, value), verify_crc))
    except LegacyCrcError:
        raise
    except Exception as e:  # zlib.error, unsupported codec
        raise ValueError("compression %s: %s" % (CODECS.get(codec, "codec %d" % codec), e))
    if not inner:
        return []
    if magic == 0:
        return [(o, v) for o, _m, _a, _k, v in inner]
    shift = offset - inner[-1][0]
    return [(shift + o, v) for o, _m, _a, _k, v in inner]


def iter_batches(segment_path, verify_crc=True):
    """The record batches of one segment file, headers only, in file order:
    dicts {"base", "last", "epoch", "magic", "crc", "crc_ok" (None unless
    verify_crc), "attributes", "codec", "transactional", "control",
    "producer_id", "producer_epoch", "base_sequence", "count", "position",
    "size"}. Stops silently where no whole v2 batch follows (read_partition
    says why). A v0/v1 message is one entry: base = last = its offset (a
    wrapper's: the last inner offset), epoch -1, count None."""
    with open(segment_path, "rb") as f:
        data = f.read()
    pos, size = 0, len(data)
    while pos + LOG_OVERHEAD + 5 <= size:
        base, length, epoch, magic = _PREFIX.unpack_from(data, pos)
        if magic in (0, 1):
            total = LOG_OVERHEAD + length
            if length < LEGACY_MIN[magic] or pos + total > size:
                return
            crc, attrs = struct.unpack_from(">Ixb", data, pos + 12)
            yield {"base": base, "last": base, "epoch": NO_EPOCH, "magic": magic, "crc": crc,
                   "crc_ok": (zlib.crc32(data[pos + 16:pos + total]) & 0xFFFFFFFF == crc) if verify_crc else None,
                   "attributes": attrs, "codec": CODECS.get(attrs & 7, str(attrs & 7)),
                   "transactional": False, "control": False, "producer_id": -1, "producer_epoch": -1,
                   "base_sequence": -1, "count": None, "position": pos, "size": total}
            pos += total
            continue
        if magic != 2:
            return
        total = LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + total > size:
            return
        (base, _length, epoch, magic, crc, attrs, last_delta, _bts, _mts,
         pid, pepoch, bseq, count) = HEADER.unpack_from(data, pos)
        yield {"base": base, "last": base + last_delta, "epoch": epoch, "magic": magic, "crc": crc,
               "crc_ok": (crc32c(data[pos + 21:pos + total]) == crc) if verify_crc else None,
               "attributes": attrs, "codec": CODECS.get(attrs & 7, str(attrs & 7)),
               "transactional": bool(attrs & ATTR_TRANSACTIONAL), "control": bool(attrs & ATTR_CONTROL),
               "producer_id": pid, "producer_epoch": pepoch, "base_sequence": bseq, "count": count,
               "position": pos, "size": total}
        pos += total


def segment_files(part_dir):
    """[(base offset, path of its .log)] of a partition directory, in base-offset order."""
    out = []
    for name in os.listdir(part_dir):
        m = SEGMENT_NAME.match(name)
        if m:
            out.append((int(m.group(1)), os.path.join(part_dir, name)))
    out.sort()
    return out


def read_partition(part_dir, verify_crc=True, keep_bad=False):
    """Every record of one partition directory.

    Returns {"log_start": base offset of the first segment,
             "leo": one past the last offset of the last whole batch (control
                    batches included), or the last segment's base offset if larger,
             "records": [[offset, leader_epoch, crc, value], ...] in offset order:
                    leader_epoch is the batch's partitionLeaderEpoch, value as in
                    decode_value, crc = value_crc(value); control records (transaction
                    markers) are left out but occupy offsets,
             "torn_tail": the last segment ends in bytes that are no whole batch,
             "bad_crc": [base offset of each batch whose CRC-32C does not match],
             "skipped": [[first, last, reason]]: offsets whose records are not in
                    "records" (bad CRC unless keep_bad, unsupported compression,
                    corrupt header: last None),
             "aborted": [[first, last]]: transactional batches that an ABORT marker
                    ended (their records are in "records", as a read_uncommitted
                    consumer sees them),
             "txn_batches": [[first, last, producer id, producer epoch, "data" | "commit" |
                    "abort"]]: every transactional batch and transaction marker, in log
                    order (who wrote what in which transaction, and which marker ended it),
             "batches", "control_batches": counts, "notes": [text]}.
    v0/v1 messages (Kafka < 0.11) are read too, with leader epoch -1."""
    segs = segment_files(part_dir)
    reader = _Reader(verify_crc=verify_crc, keep_bad=keep_bad)
    for i, (_base, path) in enumerate(segs):
        reader.segment(path, last=i == len(segs) - 1)
    log_start = segs[0][0] if segs else 0
    leo = reader.last_offset + 1 if reader.last_offset is not None else log_start
    if segs:
        leo = max(leo, segs[-1][0])
    return {"log_start": log_start, "leo": leo, "records": reader.records,
            "torn_tail": reader.torn_tail, "bad_crc": reader.bad_crc, "skipped": reader.skipped,
            "aborted": reader.aborted, "txn_batches": reader.txn_batches, "batches": reader.batches,
            "control_batches": reader.control_batches, "notes": reader.notes}


# -- log end of a running broker -------------------------------------------------
_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position


def _last_index_position(index_path):
    """Position in the .log of the last used entry of an offset index, 0 if none.

    The active segment's index is preallocated (segment.index.bytes, 10 MiB by
    default) and filled with zeros past its last entry; entries increase, and an
    entry's position is never 0 (one is written only after index.interval.bytes
    of batches), so the used entries are the prefix of non-zero ones: binary
    search, a few 8-byte reads."""
    try:
        f = open(index_path, "rb")
    except (FileNotFoundError, NotADirectoryError):
        return 0
    with f:
        n = os.fstat(f.fileno()).st_size // 8
        lo, hi = 0, n  # entries [0, lo) are used; [hi, n) are not
        best = 0
        while lo < hi:
            mid = (lo + hi) // 2
            f.seek(mid * 8)
            chunk = f.read(8)
            if len(chunk) < 8:
                hi = mid
                continue
            _rel, position = _INDEX_ENTRY.unpack(chunk)
            if position > 0:
                best = position
                lo = mid + 1
            else:
                hi = mid
        return best


def _scan_ends(path, base, start):
    """(end after the last whole batch read from `start` on or None, file size)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if start >= size:
            return None, size
        f.seek(start)
        data = f.read()
    end = None
    pos = 0
    n = len(data)
    while pos + LOG_OVERHEAD + 5 <= n:
        _b, length, _e, magic = _PREFIX.unpack_from(data, pos)
        if magic in (0, 1):  # a v0/v1 message: its offset is its last (a wrapper's too)
            if length < LEGACY_MIN[magic] or pos + LOG_OVERHEAD + length > n:
                break
            end = _b + 1
            pos += LOG_OVERHEAD + length
            continue
        if pos + 27 > n or length < HEADER_SIZE - LOG_OVERHEAD or pos + LOG_OVERHEAD + length > n:
            break  # a batch still being written, a torn tail, or preallocated zeros
        end = _b + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
        pos += LOG_OVERHEAD + length
    return end, size


def log_end(part_dir):
    """The offset after the last complete batch of a (possibly running) broker's
    partition: reads only the last segment, from its last offset-index entry on,
    batch headers only (no CRC check, no record decoding). The segment's base
    offset when it holds no whole batch (a freshly rolled segment); 0 without
    segments."""
    base = 0
    for _attempt in range(3):
        segs = segment_files(part_dir)
        if not segs:
            return 0
        base, path = segs[-1]
        try:
            start = _last_index_position(path[:-4] + ".index")
            end, _size = _scan_ends(path, base, start)
            if end is None and start > 0:
                # the indexed batch is whole when its entry is written: the log was
                # truncated under the index; scan the segment from its start
                end, _size = _scan_ends(path, base, 0)
        except FileNotFoundError:
            continue  # rolled or deleted while we looked: list again
        return base if end is None else end
    return base


# -- checkpoint files --------------------------------------------------------------
def _checkpoint_lines(path):
    with open(path, "r") as f:
        lines = [line.strip() for line in f.read().splitlines()]
    lines = [line for line in lines if line]
    if len(lines) < 2:
        raise ValueError("%s: expected a version line and a count line" % path)
    version, count = int(lines[0]), int(lines[1])
    if version != 0:
        raise ValueError("%s: unknown checkpoint version %d" % (path, version))
    entries = lines[2:]
    if len(entries) != count:
        raise ValueError("%s: header says %d entries, file has %d" % (path, count, len(entries)))
    return entries


def read_offset_checkpoint(path):
    """A log directory's `replication-offset-checkpoint`,
    `recovery-point-offset-checkpoint` or `log-start-offset-checkpoint`:
    {(topic, partition): offset}. Format: version 0, count, `<topic> <partition> <offset>`."""
    out = {}
    for line in _checkpoint_lines(path):
        topic, part, offset = line.split()
        out[(topic, int(part))] = int(offset)
    return out


def read_leader_epoch_checkpoint(path):
    """A partition's `leader-epoch-checkpoint`: [[epoch, start offset], ...]."""
    out = []
    for line in _checkpoint_lines(path):
        epoch, start = line.split()
        out.append([int(epoch), int(start)])
    return out


def parse_properties(text):
    """A Java properties text's `key=value` lines as {key: value} (comments skipped)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def read_meta_properties(log_dir):
    """`meta.properties` of a log directory as {key: value} ({} if absent)."""
    try:
        with open(os.path.join(log_dir, "meta.properties")) as f:
            return parse_properties(f.read())
    except FileNotFoundError:
        return {}


def _optional_checkpoint(log_dir, name, notes=None):
    """{} when the file is absent or unreadable: a broker killed while it rewrote the file
    leaves it empty (seen on Kafka 4.1 after SIGKILL); the problem goes to `notes`."""
    path = os.path.join(log_dir, name)
    if not os.path.exists(path):
        return {}
    try:
        return read_offset_checkpoint(path)
    except ValueError as e:
        if notes is not None:
            notes.append(str(e))
        return {}


# -- whole log directories --------------------------------------------------------
def partition_dirs(log_dir, topic):
    """{partition: directory} of `topic` in a log directory (not `-delete`/`-future` dirs)."""
    pat = re.compile(r"^%s-(\d+)$" % re.escape(topic))
    out = {}
    for name in os.listdir(log_dir):
        m = pat.match(name)
        if m and os.path.isdir(os.path.join(log_dir, name)):
            out[int(m.group(1))] = os.path.join(log_dir, name)
    return out


def read_log_dir(log_dir, topic, **kw):
    """{partition: read_partition(its directory)} for one topic of a log directory."""
    return {p: read_partition(d, **kw) for p, d in sorted(partition_dirs(log_dir, topic).items())}


def dump(log_dir, topic, broker=None):
    """One broker's replicas of `topic` in the harness's Dump shape:
    {"broker": broker, "partitions": [{"topic", "partition", "hw", "leo", "log_start",
     "records", ...}]}.

    hw: the replication-offset-checkpoint's (written every
    replica.high.watermark.checkpoint.interval.ms, 5 s, and at a clean shutdown:
    after a crash it may be behind what the broker had), 0 when it has no entry
    (nothing counts as committed on this replica), with "hw_source" saying which.
    log_start: the larger of the first segment's base offset and the
    log-start-offset-checkpoint's value; records below it are left out. Each
    partition also carries the reader's "torn_tail", "bad_crc", "skipped",
    "aborted", "notes", "txn_batches" (where it has any), and "epoch_cache"
    (the leader-epoch-checkpoint).
    broker: taken from meta.properties `node.id` when not given."""
    if broker is None:
        meta = read_meta_properties(log_dir)
        node = meta.get("node.id") or meta.get("broker.id")
        broker = int(node) if node is not None else None
    problems = []
    hws = _optional_checkpoint(log_dir, "replication-offset-checkpoint", problems)
    starts = _optional_checkpoint(log_dir, "log-start-offset-checkpoint", problems)
    parts = []
    for p, d in sorted(partition_dirs(log_dir, topic).items()):
        r = read_partition(d)
        log_start = max(r["log_start"], starts.get((topic, p), 0))
        records = r["records"]
        if log_start > r["log_start"]:
            records = [rec for rec in records if rec[0] >= log_start]
        hw = hws.get((topic, p))
        epoch_path = os.path.join(d, "leader-epoch-checkpoint")
        try:
            epochs = read_leader_epoch_checkpoint(epoch_path) if os.path.exists(epoch_path) else []
        except ValueError as e:  # emptied by a kill mid-rewrite, as above
            epochs = []
            problems.append(str(e))
        parts.append({"topic": topic, "partition": p,
                      "hw": hw if hw is not None else 0,
                      "hw_source": "replication-offset-checkpoint" if hw is not None else "none",
                      "leo": r["leo"], "log_start": log_start, "records": records,
                      "epoch_cache": epochs, "torn_tail": r["torn_tail"], "bad_crc": r["bad_crc"],
                      "skipped": r["skipped"], "aborted": r["aborted"], "notes": problems + r["notes"],
                      **({"txn_batches": [b for b in r["txn_batches"] if b[1] >= log_start]}
                         if r["txn_batches"] else {})})
    return {"broker": broker, "partitions": parts}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: segments.py LOG_DIR TOPIC [--broker N] | --partition PART_DIR | --log-end PART_DIR")
    try:
        if len(argv) == 2 and argv[0] == "--partition":
            out = read_partition(argv[1])
        elif len(argv) == 2 and argv[0] == "--log-end":
            out = log_end(argv[1])
        elif len(argv) in (2, 4) and not argv[0].startswith("--"):
            broker = None
            if len(argv) == 4:
                if argv[2] != "--broker":
                    raise SystemExit(usage)
                broker = int(argv[3])
            out = dump(argv[0], argv[1], broker)
        else:
            print(usage, file=sys.stderr)
            return 2
    except (OSError, ValueError) as e:
        print("segments.py: %s" % e, file=sys.stderr)
        return 2
    json.dump(out, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

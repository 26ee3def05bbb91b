"""systems/kafka/segments.py on message format v0 and v1 (Kafka before 0.11).

The fixture tests/data/kafka-0.10.2/ is two partitions a real Kafka 0.10.2.2
broker wrote (magic 1, its default, and magic 0 through the topic's
message.format.version=0.9.0), with Kafka 0.10.2.2's own DumpLogSegments text
beside them; every offset and value the reader returns must be the one Kafka's
tool prints, and those messages have no leader epoch (-1).
"""
from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import pytest

from systems.kafka import segments

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "kafka-0.10.2"
LOGDIR = DATA / "logdir"
LINE = re.compile(r"^offset: (\d+) position: (\d+) .*? magic: (\d) compresscodec: (\w+) crc: (\d+)(.*)$")


def parse_dls(text: str) -> dict[str, list]:
    """0.10.2's DumpLogSegments --deep-iteration text -> {file: [(offset, position, magic, payload or None)]}."""
    out: dict[str, list] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = line.split(" ", 1)[1]
            out[current] = []
            continue
        m = LINE.match(line)
        if m:
            offset, position, magic, _codec, _crc, rest = m.groups()
            at = rest.find(" payload: ")
            out[current].append((int(offset), int(position), int(magic),
                                 rest[at + len(" payload: "):] if at >= 0 else None))
    return out


DLS = parse_dls((DATA / "dump-log-segments.txt").read_text())


@pytest.mark.unit
@pytest.mark.parametrize("topic,magic", [("log", 1), ("log0", 0)])
def test_reader_matches_kafka_0_10_2_dump_log_segments(topic, magic):
    got = segments.read_partition(LOGDIR / f"{topic}-0")
    assert got["bad_crc"] == [] and got["skipped"] == [] and not got["torn_tail"] and got["notes"] == []
    want = [(o, None if p is None else segments.decode_value(p.encode()))
            for f, rows in sorted(DLS.items()) if f.startswith(f"{topic}-0/") for o, _pos, _m, p in rows]
    assert len(want) == 43
    assert {m for f, rows in DLS.items() if f.startswith(f"{topic}-0/") for _o, _p, m, _v in rows} == {magic}
    assert [(o, v) for o, _e, _c, v in got["records"]] == want
    assert {e for _o, e, _c, _v in got["records"]} == {-1}
    for _o, _e, crc, value in got["records"]:
        assert crc == segments.value_crc(value)
    assert got["leo"] == 43 and segments.log_end(LOGDIR / f"{topic}-0") == 43
    # one entry per message on disk: the gzip wrapper of offsets 30..39 is one (at DumpLogSegments' position)
    entries = [b for _base, path in segments.segment_files(LOGDIR / f"{topic}-0")
               for b in segments.iter_batches(path)]
    assert got["batches"] == len(entries) == 43 - 9
    wrapper = [b for b in entries if b["codec"] == "gzip"]
    assert [(b["base"], b["crc_ok"]) for b in wrapper] == [(39, True)]
    dls_pos = {o: pos for f, rows in DLS.items() if f.startswith(f"{topic}-0/0000000000000000002")
               or f.startswith(f"{topic}-0/00000000000000000000") for o, pos, _m, _v in rows}
    assert wrapper[0]["position"] == dls_pos[30] == dls_pos[39]


@pytest.mark.unit
def test_dump_of_the_0_10_2_log_dir():
    d = segments.dump(str(LOGDIR), "log")
    assert d["broker"] == 1   # meta.properties broker.id
    (p,) = d["partitions"]
    assert (p["hw"], p["hw_source"], p["leo"], p["log_start"], p["epoch_cache"]) == \
        (43, "replication-offset-checkpoint", 43, 0, [])


def _v1(offset: int, value: bytes | None, attrs: int = 0) -> bytes:
    body = struct.pack(">bbqi", 1, attrs, 0, -1)
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


@pytest.mark.unit
def test_v1_bad_crc_torn_tail_and_snappy(tmp_path):
    part = tmp_path / "log-0"
    part.mkdir()
    good, flipped = _v1(0, b"1"), bytearray(_v1(1, b"2"))
    flipped[-1] ^= 1
    snappy = _v1(2, b"\x00" * 8, attrs=2)
    torn = _v1(3, b"4")[:-2]
    (part / f"{0:020d}.log").write_bytes(good + bytes(flipped) + snappy + torn)
    got = segments.read_partition(part)
    assert [r[0] for r in got["records"]] == [0]
    assert got["bad_crc"] == [1] and got["torn_tail"]
    assert [s[0] for s in got["skipped"]] == [1, 2] and "snappy" in got["skipped"][1][2]
    kept = segments.read_partition(part, keep_bad=True)
    assert [(r[0], r[3]) for r in kept["records"]] == [(0, 1), (1, 3)]

"""Partition log: append, read, roll, truncate, flush and crash recovery on real files."""

import os
import struct
import zlib

import pytest

from replica.storage import (
    PartitionLog, Record, StorageError, encode_value, list_partition_dirs,
    parse_partition_dir_name, partition_dir_name, read_segment_file, segment_file_name, value_crc,
)

pytestmark = pytest.mark.unit


def seg_files(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".log"))


def test_append_read_and_reopen(tmp_path):
    d = str(tmp_path / "log-0")
    with PartitionLog(d) as log:
        assert (log.log_start, log.leo) == (0, 0)
        recs = log.append_values(1, [10, "x", {"a": [1, 2]}])
        assert [r.offset for r in recs] == [0, 1, 2]
        assert recs[2] == Record(2, 1, value_crc({"a": [1, 2]}), {"a": [1, 2]})
        log.append_values(2, [11])
        assert log.leo == 4
        assert [r.value for r in log.read(1, max_records=2)] == ["x", {"a": [1, 2]}]
        assert log.read(2, max_offset=3) == [recs[2]]
        assert log.read(4) == []
    assert seg_files(d) == [segment_file_name(0)] == ["00000000000000000000.log"]
    with PartitionLog(d) as again:
        assert again.leo == 4
        assert [list(r) for r in again.records] == [list(r) for r in log.records]
        assert again.recovered_bytes_dropped == 0


def test_crc_is_zlib_crc32_of_json():
    assert value_crc(17) == zlib.crc32(b"17")
    assert value_crc("a") == zlib.crc32(b'"a"')
    assert encode_value({"b": 1, "a": 2}) == b'{"a":2,"b":1}'


def test_follower_append_must_be_contiguous_and_crc_consistent(tmp_path):
    with PartitionLog(str(tmp_path / "t-1")) as log:
        log.append([(0, 1, 5), Record(1, 1, value_crc(6), 6)])
        with pytest.raises(StorageError, match="expected 2"):
            log.append([(3, 1, 7)])
        with pytest.raises(StorageError, match="CRC"):
            log.append([(2, 1, 123, 7)])
        assert log.leo == 2


def test_segment_roll_and_truncate_across_segments(tmp_path):
    d = str(tmp_path / "log-2")
    with PartitionLog(d, segment_bytes=64) as log:
        for i in range(10):
            log.append_values(0, [i * 1000])
        names = seg_files(d)
        assert len(names) > 2
        infos = log.segments()
        assert infos[0].base_offset == 0 and infos[-1].next_offset == 10
        assert all(a.next_offset == b.base_offset for a, b in zip(infos, infos[1:]))
        cut = infos[1].base_offset          # truncate exactly at a segment boundary
        assert log.truncate_to(cut) == 10 - cut
        assert log.leo == cut
        assert seg_files(d) == names[:1]
        log.append_values(5, ["new"])
        assert log.get(cut).value == "new" and log.get(cut).epoch == 5
    with PartitionLog(d, segment_bytes=64) as again:
        assert [r.value for r in again.records] == [i * 1000 for i in range(cut)] + ["new"]


def test_truncate_inside_segment_and_below_log_start(tmp_path):
    d = str(tmp_path / "log-0")
    with PartitionLog(d) as log:
        log.append_values(0, range(5))
        assert log.truncate_to(3) == 2
        assert log.truncate_to(7) == 0
        assert [r.value for r in log.records] == [0, 1, 2]
        log.truncate_fully_and_start_at(50)
        assert (log.log_start, log.leo) == (50, 50)
        log.append([(50, 3, "z")])
    assert seg_files(d) == [segment_file_name(50)]
    with PartitionLog(d) as again:
        assert (again.log_start, again.leo) == (50, 51)


def test_delete_segments_before_keeps_active_segment(tmp_path):
    d = str(tmp_path / "log-0")
    with PartitionLog(d, segment_bytes=40) as log:
        for i in range(8):
            log.append_values(0, [i])
        bases = [s.base_offset for s in log.segments()]
        start = log.delete_segments_before(bases[2])
        assert start == bases[2] == log.log_start
        assert log.read(0)[0].offset == bases[2]
        assert log.get(0) is None
        log.delete_segments_before(10 ** 6)
        assert len(log.segments()) == 1 and log.leo == 8
    with PartitionLog(d, segment_bytes=40) as again:
        assert again.log_start == log.log_start and again.leo == 8


@pytest.mark.parametrize("damage", ["torn-length", "torn-body", "bad-crc", "bad-offset", "garbage-tail"])
def test_recovery_drops_torn_or_corrupt_tail(tmp_path, damage):
    d = str(tmp_path / "log-0")
    with PartitionLog(d) as log:
        log.append_values(1, [1, 2, 3])
        good_size = log.segments()[0].size
        log.append_values(1, [4])
        log.flush()
    path = os.path.join(d, segment_file_name(0))
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        if damage == "torn-length":
            data = data[: good_size + 2]
        elif damage == "torn-body":
            data = data[:-1]
        elif damage == "bad-crc":
            data[-1] ^= 0xFF
        elif damage == "bad-offset":
            struct.pack_into(">q", data, good_size + 4, 99)
        elif damage == "garbage-tail":
            data += b"\xff\xff\xff\xff garbage"
        f.seek(0)
        f.truncate()
        f.write(data)
    with PartitionLog(d) as log:
        expected = [1, 2, 3, 4] if damage == "garbage-tail" else [1, 2, 3]
        assert [r.value for r in log.records] == expected
        assert log.recovered_bytes_dropped > 0
        log.append_values(2, ["after"])         # the log is usable again
        assert os.path.getsize(path) == log.segments()[0].size
    assert [r.value for r in read_segment_file(path)] == expected + ["after"]


def test_recovery_deletes_segments_after_a_corrupt_one(tmp_path):
    d = str(tmp_path / "log-0")
    with PartitionLog(d, segment_bytes=64) as log:
        for i in range(6):
            log.append_values(0, [i])
        second = log.segments()[1]
    with open(second.path, "r+b") as f:
        f.seek(20)
        f.write(b"XX")                        # corrupt the first record's value
    with PartitionLog(d, segment_bytes=64) as log:
        assert log.leo == second.base_offset
        assert len(seg_files(d)) == 2         # the first plus the (now empty) corrupt one


def test_flush_messages_and_flush_ms(tmp_path):
    now = [0.0]
    with PartitionLog(str(tmp_path / "a-0"), flush_messages=3) as log:
        log.append_values(0, [1, 2])
        assert log.recovery_point == 0
        log.append_values(0, [3])
        assert log.recovery_point == 3
    with PartitionLog(str(tmp_path / "b-0"), flush_ms=100, clock=lambda: now[0]) as log:
        log.append_values(0, [1])
        now[0] = 0.05
        assert not log.maybe_flush() and log.recovery_point == 0
        now[0] = 0.2
        assert log.maybe_flush() and log.recovery_point == 1
        assert not log.maybe_flush()
    with PartitionLog(str(tmp_path / "c-0")) as log:     # defaults: never flush by itself
        log.append_values(0, range(100))
        assert not log.maybe_flush() and log.recovery_point == 0


def test_partition_dir_names(tmp_path):
    assert partition_dir_name("log", 3) == "log-3"
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    for bad in ["log", "log-", "-3", "log-x"]:
        with pytest.raises(ValueError):
            parse_partition_dir_name(bad)
    PartitionLog(str(tmp_path / "log-1")).close()
    PartitionLog(str(tmp_path / "log-0")).close()
    (tmp_path / "replication-offset-checkpoint").write_text("0\n0\n")
    (tmp_path / "junk").mkdir()
    assert [(t, p) for t, p, _ in list_partition_dirs(str(tmp_path))] == [("log", 0), ("log", 1)]


@pytest.mark.parametrize("value", [0, -7, 2 ** 70, True, None, 1.5, "é✓", [1, "a"], {"b": {"z": 1, "a": [2]}}])
def test_crc_matches_the_protocol_definition(value):
    from replica.protocol import record_crc
    assert value_crc(value) == record_crc(value)

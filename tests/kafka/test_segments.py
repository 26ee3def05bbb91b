"""systems/kafka/segments.py: Kafka's segment files read in pure Python.

Two tiers. `unit`: the committed fixture tests/data/kafka/ (a partition a real
Kafka 4.1.1 broker wrote, with Kafka's own DumpLogSegments text beside it),
CRC-32C test vectors, and hand-built batches for what a healthy broker does not
write (snappy, torn tails, bit flips). `root` (a real
process): one Kafka 4.1.1 KRaft node on 127.0.0.1 writes a few thousand values
(single-record, batched, gzip, idempotent and transactional producers, a
restart between them so the leader epoch moves), and the reader must agree with
the acknowledgements, with `kafka.tools.DumpLogSegments`, and, while the broker
runs, `log_end` with the high watermark a consumer sees.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from systems.kafka import segments

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_local  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "kafka"
FIXTURE_LOGDIR = DATA / "logdir"
FIXTURE_PART = FIXTURE_LOGDIR / "log-0"
SEGMENTS_PY = REPO / "systems" / "kafka" / "segments.py"


def copy_part(src: Path, tmp_path: Path, name: str = "log-0") -> Path:
    dest = tmp_path / name
    shutil.copytree(src, dest)
    return dest


def flip_bit(path: Path, position: int, bit: int = 0) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ (1 << bit)]))


def expected_from_dls(parsed: dict) -> dict[int, tuple[int, object]]:
    """DumpLogSegments' data records -> {offset: (epoch, value as the harness decodes it)}."""
    out = {}
    for offset, epoch, payload in parsed["records"]:
        out[offset] = (epoch, None if payload is None else segments.decode_value(payload.encode()))
    return out


def check_against_dls(part_dir: Path, parsed: dict) -> dict:
    """The reader's view of `part_dir` equals Kafka's DumpLogSegments `parsed`."""
    got = segments.read_partition(part_dir)
    assert got["bad_crc"] == [] and got["skipped"] == [] and not got["torn_tail"], got["notes"]
    mine = {o: (e, v) for o, e, _c, v in got["records"]}
    assert mine == expected_from_dls(parsed)
    assert [r[0] for r in got["records"]] == sorted(mine), "records in offset order"
    for offset, _epoch, crc, value in got["records"]:
        assert crc == zlib.crc32(json.dumps(value, separators=(",", ":")).encode())
    markers = {o for o, _kind in parsed["markers"]}
    assert not markers & set(mine), "control records are not data records"
    assert got["leo"] == parsed["batches"][-1]["last"] + 1
    assert got["batches"] == len(parsed["batches"])
    assert got["control_batches"] == sum(b["control"] for b in parsed["batches"])
    # batch by batch: the stored CRC-32C is Kafka's, and it verifies
    mine_batches = [b for seg in segments.segment_files(part_dir) for b in segments.iter_batches(seg[1])]
    assert [(b["base"], b["last"], b["epoch"], b["crc"], b["codec"], b["control"], b["transactional"])
            for b in mine_batches] == \
           [(b["base"], b["last"], b["epoch"], b["crc"], b["codec"], b["control"], b["transactional"])
            for b in parsed["batches"]]
    assert all(b["crc_ok"] for b in mine_batches) and all(b["valid"] for b in parsed["batches"])
    # aborted transactions: the data batches an ABORT marker of the same producer ended
    aborted, open_txn = [], {}
    for b in parsed["batches"]:
        if b["transactional"] and not b["control"]:
            open_txn.setdefault(b["pid"], []).append([b["base"], b["last"]])
        elif b["control"]:
            ranges = open_txn.pop(b["pid"], [])
            if any(o == b["base"] and kind == "ABORT" for o, kind in parsed["markers"]):
                aborted.extend(ranges)
    assert got["aborted"] == aborted
    # each transactional batch and marker with its producer id, in log order (the producer epoch
    # is the batch header's, which iter_batches reads at the same place)
    kinds = dict(parsed["markers"])
    assert [(b[0], b[1], b[2], b[4]) for b in got["txn_batches"]] == \
        [(b["base"], b["last"], b["pid"], "data" if not b["control"] else
          "abort" if kinds.get(b["base"]) == "ABORT" else "commit")
         for b in parsed["batches"] if b["transactional"]]
    epochs = {b["base"]: b["producer_epoch"] for b in mine_batches}
    assert all(b[3] == epochs[b[0]] for b in got["txn_batches"])
    return got


# -- batches built by hand (what a healthy broker does not write) --------------------
def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def build_batch(base: int, values: list[bytes | None], epoch: int = 0, codec: int = 0,
                attributes: int = 0, records: bytes | None = None, deltas: list[int] | None = None) -> bytes:
    """A record batch v2, encoded independently of the reader."""
    if records is None:
        body = bytearray()
        for i, v in enumerate(values):
            delta = deltas[i] if deltas else i
            rec = (b"\x00" + zigzag(i * 1000) + zigzag(delta) + zigzag(-1)
                   + (zigzag(-1) if v is None else zigzag(len(v)) + v) + zigzag(0))
            body += zigzag(len(rec)) + rec
        records = bytes(body)
    last_delta = (deltas[-1] if deltas else len(values) - 1)
    after_crc = struct.pack(">hiqqqhii", attributes | codec, last_delta, 0, 0, -1, -1, -1, len(values)) + records
    crc = segments.crc32c(after_crc)
    after_len = struct.pack(">ibI", epoch, 2, crc) + after_crc
    return struct.pack(">qi", base, len(after_len)) + after_len


def write_segments(part: Path, batches_by_base: dict[int, list[bytes]]) -> None:
    part.mkdir(parents=True, exist_ok=True)
    for base, batches in batches_by_base.items():
        (part / f"{base:020d}.log").write_bytes(b"".join(batches))


# ---------------------------------------------------------------------------
# unit tier: no Java
# ---------------------------------------------------------------------------
@pytest.mark.unit
def test_crc32c_test_vectors():
    # RFC 3720 (iSCSI) B.4 and the usual check value
    assert segments.crc32c(b"123456789") == 0xE3069283
    assert segments.crc32c(b"") == 0
    assert segments.crc32c(bytes(32)) == 0x8A9136AA
    assert segments.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert segments.crc32c(bytes(range(32))) == 0x46DD794E
    assert segments.crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    # the slicing-by-8 path and the byte path agree at every length and split
    data = bytes((i * 131 + 7) & 0xFF for i in range(300))
    for n in range(0, 300, 7):
        assert segments.crc32c(data[:n]) == segments.crc32c(data[n:n], segments.crc32c(data[:n]))
        assert segments.crc32c(data[:n], segments.crc32c(b"")) == segments.crc32c(data[:n])
        assert segments.crc32c(data[n:], segments.crc32c(data[:n])) == segments.crc32c(data)


@pytest.mark.unit
def test_fixture_matches_kafkas_dump_log_segments():
    parsed = kafka_local.parse_dump_log_segments((DATA / "dump-log-segments.txt").read_text())
    assert len(parsed["batches"]) == 49 and len(parsed["markers"]) == 2
    got = check_against_dls(FIXTURE_PART, parsed)
    assert got["log_start"] == 0 and got["leo"] == 76
    assert got["aborted"] == [[66, 70]]
    assert {b["codec"] for b in parsed["batches"]} == {"none", "gzip"}
    by_offset = {o: (e, v) for o, e, _c, v in got["records"]}
    assert by_offset[0] == (0, 0) and by_offset[49] == (0, 49) and by_offset[50] == (2, 50)
    assert by_offset[72] == (2, "text") and by_offset[73] == (2, "plain text")
    assert by_offset[74] == (2, None) and by_offset[75] == (2, 70)
    assert 65 not in by_offset and 71 not in by_offset  # the COMMIT and ABORT markers


@pytest.mark.unit
def test_fixture_dump_and_checkpoints():
    d = segments.dump(str(FIXTURE_LOGDIR), "log")
    assert d["broker"] == 1  # meta.properties node.id
    (p,) = d["partitions"]
    assert (p["topic"], p["partition"], p["hw"], p["leo"], p["log_start"]) == ("log", 0, 76, 76, 0)
    assert p["hw_source"] == "replication-offset-checkpoint"
    assert p["epoch_cache"] == [[0, 0], [2, 50]]
    assert p["records"] == segments.read_partition(FIXTURE_PART)["records"]
    assert json.loads(json.dumps(d)) == d
    assert segments.dump(str(FIXTURE_LOGDIR), "log", broker=7)["broker"] == 7
    assert segments.dump(str(FIXTURE_LOGDIR), "other")["partitions"] == []
    # each record's epoch is the one the leader-epoch-checkpoint gives its offset
    for offset, epoch, _crc, _v in p["records"]:
        assert epoch == max(e for e, start in p["epoch_cache"] if start <= offset)

    assert segments.read_offset_checkpoint(FIXTURE_LOGDIR / "replication-offset-checkpoint") == \
        {("__transaction_state", 0): 7, ("log", 0): 76}
    assert segments.read_offset_checkpoint(FIXTURE_LOGDIR / "recovery-point-offset-checkpoint")[("log", 0)] == 76
    assert segments.read_offset_checkpoint(FIXTURE_LOGDIR / "log-start-offset-checkpoint") == {}
    assert segments.read_leader_epoch_checkpoint(FIXTURE_PART / "leader-epoch-checkpoint") == [[0, 0], [2, 50]]


@pytest.mark.unit
def test_checkpoint_format_errors(tmp_path):
    bad = tmp_path / "replication-offset-checkpoint"
    bad.write_text("0\n2\nlog 0 5\n")
    with pytest.raises(ValueError, match="2 entries"):
        segments.read_offset_checkpoint(bad)
    bad.write_text("1\n0\n")
    with pytest.raises(ValueError, match="version 1"):
        segments.read_offset_checkpoint(bad)
    ok = tmp_path / "log-start-offset-checkpoint"
    ok.write_text("0\n1\nmy-topic-x 3 12\n")
    assert segments.read_offset_checkpoint(ok) == {("my-topic-x", 3): 12}


@pytest.mark.unit
def test_log_start_checkpoint_drops_records_below(tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(FIXTURE_LOGDIR, logdir)
    (logdir / "log-start-offset-checkpoint").write_text("0\n1\nlog 0 40\n")
    (p,) = segments.dump(str(logdir), "log")["partitions"]
    assert p["log_start"] == 40 and p["records"][0][0] == 40 and p["leo"] == 76


@pytest.mark.unit
def test_a_checkpoint_emptied_by_a_kill_is_noted_not_fatal(tmp_path):
    """A broker SIGKILLed while it rewrote its checkpoints leaves them empty (Kafka 4.1): the
    dump of its stopped replicas still reads, with no HW (nothing counts as committed)."""
    logdir = tmp_path / "logdir"
    shutil.copytree(FIXTURE_LOGDIR, logdir)
    for name in ("log-start-offset-checkpoint", "replication-offset-checkpoint"):
        (logdir / name).write_text("")
    (logdir / "log-0" / "leader-epoch-checkpoint").write_text("")
    (p,) = segments.dump(str(logdir), "log")["partitions"]
    assert (p["hw"], p["hw_source"], p["log_start"], p["leo"], p["epoch_cache"]) == (0, "none", 0, 76, [])
    assert sum("expected a version line" in n for n in p["notes"]) == 3


@pytest.mark.unit
def test_script_on_a_bare_python(tmp_path):
    """The harness copies segments.py to a host with python3 only: run a copy of
    it isolated from site-packages and from this repository."""
    script = tmp_path / "segments.py"
    shutil.copy(SEGMENTS_PY, script)
    python = shutil.which("python3") or sys.executable
    out = subprocess.run([python, "-I", "-S", str(script), str(FIXTURE_LOGDIR), "log"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(json.dumps(segments.dump(str(FIXTURE_LOGDIR), "log")))
    out = subprocess.run([python, "-I", "-S", str(script), "--log-end", str(FIXTURE_PART)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout) == 76
    out = subprocess.run([python, "-I", "-S", str(script), "--partition", str(FIXTURE_PART)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["leo"] == 76
    out = subprocess.run([python, "-I", "-S", str(script), str(tmp_path / "absent"), "log"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "absent" in out.stderr
    imports = [line for line in SEGMENTS_PY.read_text().splitlines() if line.startswith(("import ", "from "))]
    assert imports and all(line.split()[1] in {"__future__", "json", "mmap", "os", "re", "struct", "sys", "zlib"}
               for line in imports), imports


@pytest.mark.unit
def test_torn_tail_fixture(tmp_path):
    whole = segments.read_partition(FIXTURE_PART)
    last_seg = segments.segment_files(FIXTURE_PART)[-1][1]
    last_batch = list(segments.iter_batches(last_seg))[-1]  # offset 75, 75 bytes at 1533
    assert (last_batch["base"], last_batch["position"]) == (75, 1533)
    for keep in (1, 11, 12, 30, 61, 70, last_batch["size"] - 1):
        part = copy_part(FIXTURE_PART, tmp_path, f"cut{keep}")
        seg = part / Path(last_seg).name
        os.truncate(seg, last_batch["position"] + keep)
        got = segments.read_partition(part)
        assert got["torn_tail"], keep
        assert got["records"] == [r for r in whole["records"] if r[0] < 75]
        assert got["leo"] == 75 == segments.log_end(part)
        assert any("torn tail" in n for n in got["notes"])
    # cut at a batch boundary: not torn, just shorter
    part = copy_part(FIXTURE_PART, tmp_path, "boundary")
    os.truncate(part / Path(last_seg).name, last_batch["position"])
    got = segments.read_partition(part)
    assert not got["torn_tail"] and got["leo"] == 75 == segments.log_end(part)
    # preallocated zeros after the last batch (file.preallocate, or a power cut)
    part = copy_part(FIXTURE_PART, tmp_path, "zeros")
    with open(part / Path(last_seg).name, "ab") as f:
        f.write(bytes(4096))
    got = segments.read_partition(part)
    assert got["torn_tail"] and got["leo"] == 76 == segments.log_end(part)
    assert got["records"] == whole["records"]


@pytest.mark.unit
def test_bit_flip_fixture(tmp_path):
    whole = segments.read_partition(FIXTURE_PART)
    first_seg = Path(segments.segment_files(FIXTURE_PART)[0][1]).name
    b10 = [b for b in segments.iter_batches(FIXTURE_PART / first_seg) if b["base"] == 10][0]
    part = copy_part(FIXTURE_PART, tmp_path, "flip")
    flip_bit(part / first_seg, b10["position"] + b10["size"] - 3, 2)  # in the value "10"
    got = segments.read_partition(part)
    assert got["bad_crc"] == [10]
    assert got["skipped"] == [[10, 10, "crc mismatch"]]
    assert got["records"] == [r for r in whole["records"] if r[0] != 10]
    assert got["leo"] == 76 and not got["torn_tail"]
    kept = segments.read_partition(part, keep_bad=True)
    assert kept["bad_crc"] == [10] and len(kept["records"]) == len(whole["records"])
    assert [r for r in kept["records"] if r[0] == 10] != [r for r in whole["records"] if r[0] == 10]
    # in the gzip batch (30..49)
    second = Path(segments.segment_files(part)[1][1])
    gz = [b for b in segments.iter_batches(second) if b["codec"] == "gzip"][0]
    flip_bit(second, gz["position"] + 80, 5)
    got = segments.read_partition(part)
    assert got["bad_crc"] == [10, 30]
    assert not any(30 <= r[0] <= 49 for r in got["records"])
    # the partition leader epoch is outside the CRC (the leader stamps it): a flip
    # there is not detectable, by Kafka or by this reader
    part2 = copy_part(FIXTURE_PART, tmp_path, "epochflip")
    flip_bit(part2 / first_seg, b10["position"] + 15, 0)
    got = segments.read_partition(part2)
    assert got["bad_crc"] == [] and [r[1] for r in got["records"] if r[0] == 10] == [1]


@pytest.mark.unit
def test_log_end_preallocated_index(tmp_path):
    part = copy_part(FIXTURE_PART, tmp_path)
    last = Path(segments.segment_files(part)[-1][1])
    index = last.with_suffix(".index")
    assert index.stat().st_size == 8  # one entry, trimmed at the clean shutdown
    rel, pos = struct.unpack(">ii", index.read_bytes())
    assert pos > 0
    with open(index, "ab") as f:  # as on an active segment: 10 MiB, zeros after the entries
        f.truncate(10 * 1024 * 1024)
    assert segments._last_index_position(str(index)) == pos
    assert segments.log_end(part) == 76
    index.unlink()
    assert segments.log_end(part) == 76
    # an index entry beyond a truncated log (the broker truncated under us)
    index.write_bytes(struct.pack(">ii", 40, 100000))
    assert segments.log_end(part) == 76
    # a freshly rolled, empty active segment: its base offset
    (part / f"{76:020d}.log").write_bytes(b"")
    (part / f"{76:020d}.index").write_bytes(bytes(1024))
    assert segments.log_end(part) == 76 == segments.read_partition(part)["leo"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert segments.log_end(empty) == 0
    assert segments.read_partition(empty)["leo"] == 0


@pytest.mark.unit
def test_built_batches_varints_and_gaps(tmp_path):
    """Multi-byte varints (values >= 64 bytes, offset deltas >= 64), null values,
    compaction-like gaps (lastOffsetDelta beyond the last record) and several segments."""
    big = b'"' + b"x" * 300 + b'"'
    values = [str(i).encode() for i in range(200)] + [big, None, b"\xff\xfe", b"[1,2]"]
    b1 = build_batch(0, values, epoch=3)
    b2 = build_batch(204, [b"-5", b"007"], epoch=4, deltas=[0, 90])  # offsets 204, 294
    b3 = build_batch(400, [b"400"], epoch=-1)
    write_segments(tmp_path / "t-0", {0: [b1, b2], 295: [b3]})
    got = segments.read_partition(tmp_path / "t-0")
    recs = {o: (e, v) for o, e, _c, v in got["records"]}
    assert recs[0] == (3, 0) and recs[199] == (3, 199)
    assert recs[200] == (3, "x" * 300) and recs[201] == (3, None)
    assert recs[202] == (3, "hex:fffe") and recs[203] == (3, [1, 2])
    assert recs[204] == (4, -5) and recs[294] == (4, "007")  # "007" is not JSON: text
    assert recs[400] == (-1, 400)
    assert got["leo"] == 401 and got["log_start"] == 0 and got["batches"] == 3
    assert segments.log_end(tmp_path / "t-0") == 401
    for o, _e, crc, v in got["records"]:
        assert crc == segments.value_crc(v)


@pytest.mark.unit
def test_gzip_and_unsupported_codecs(tmp_path):
    recs = build_batch(0, [b"1", b"2", b"3"])[61:]
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    gzipped = gz.compress(recs) + gz.flush()
    batches = [build_batch(0, [b"1", b"2", b"3"], codec=1, records=gzipped),
               build_batch(3, [b"4", b"5"], codec=2, records=b"\x82SNAPPY\x00not really"),
               build_batch(5, [b"6"], codec=3, records=b"lz4?"),
               build_batch(6, [b"7"], codec=4, records=b"zstd?"),
               build_batch(7, [b"8"])]
    write_segments(tmp_path / "t-0", {0: batches})
    got = segments.read_partition(tmp_path / "t-0")
    assert [(r[0], r[3]) for r in got["records"]] == [(0, 1), (1, 2), (2, 3), (7, 8)]
    assert [s[:2] for s in got["skipped"]] == [[3, 4], [5, 5], [6, 6]]
    assert ["snappy" in got["skipped"][0][2], "lz4" in got["skipped"][1][2], "zstd" in got["skipped"][2][2]] \
        == [True, True, True]
    assert got["leo"] == 8 and got["bad_crc"] == []


@pytest.mark.unit
def test_message_format_v1_is_read_with_no_epoch(tmp_path):
    # a v1 message: offset, size, crc, magic 1, attributes, timestamp, key -1, value
    body = struct.pack(">bbqi", 1, 0, 0, -1) + struct.pack(">i", 1) + b"7"
    msg = struct.pack(">I", zlib.crc32(body)) + body
    part = tmp_path / "old-0"
    write_segments(part, {0: [struct.pack(">qi", 0, len(msg)) + msg]})
    got = segments.read_partition(part)
    assert got["records"] == [[0, -1, zlib.crc32(b"7"), 7]] and got["leo"] == 1 and got["notes"] == []
    (entry,) = segments.iter_batches(segments.segment_files(part)[0][1])
    assert (entry["magic"], entry["epoch"], entry["crc_ok"]) == (1, -1, True)
    assert segments.log_end(part) == 1


@pytest.mark.unit
def test_corrupt_magic_mid_segment_stops_that_segment(tmp_path):
    b0, b1, b2 = build_batch(0, [b"1"]), build_batch(1, [b"2"]), build_batch(2, [b"3"])
    b1 = b1[:16] + b"\x07" + b1[17:]
    write_segments(tmp_path / "t-0", {0: [b0, b1, b2], 3: [build_batch(3, [b"4"])]})
    got = segments.read_partition(tmp_path / "t-0")
    assert [r[0] for r in got["records"]] == [0, 3]
    assert got["skipped"][0][:2] == [1, None] and "magic 7" in got["skipped"][0][2]
    assert got["leo"] == 4 and not got["torn_tail"]


@pytest.mark.unit
def test_missing_jars_name_the_fix(monkeypatch, tmp_path):
    """Without the jars the broker tests fail (never skip) with the command that installs them."""
    assert kafka_local.LIB == Path(kafka_local.__file__).resolve().parents[2] / "build" / "kafka" / "4.1.1" / "lib"
    monkeypatch.setattr(kafka_local, "LIB", tmp_path / "build" / "kafka" / "4.1.1" / "lib")
    monkeypatch.setattr(kafka_local, "REPO", tmp_path)
    assert "bash scripts/setup.sh" in kafka_local.jars_missing()
    with pytest.raises(pytest.fail.Exception, match="bash scripts/setup.sh"):
        _need_kafka()


# ---------------------------------------------------------------------------
# root tier: one real Kafka 4.1.1 node
# ---------------------------------------------------------------------------
TOPIC = "log"
PARTITIONS = 3


def _need_kafka():
    missing = kafka_local.jars_missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    if shutil.which("java") is None:
        pytest.fail("`java` (17 or later) is not on PATH: run `bash scripts/setup.sh`", pytrace=False)
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        pytest.fail("the Python package confluent-kafka is missing: run `bash scripts/setup.sh`", pytrace=False)


def _sample_log_end(node, parts, samples, timings):
    hws = kafka_local.high_watermarks(node, TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        part = node.log_dir / f"{TOPIC}-{p}"
        t = time.perf_counter()
        end = segments.log_end(part)
        timings.append(time.perf_counter() - t)
        active = Path(segments.segment_files(part)[-1][1])
        samples.append({"partition": p, "log_end": end, "hw": hws[p],
                        "index_bytes": active.with_suffix(".index").stat().st_size,
                        "log_bytes": active.stat().st_size})


@pytest.fixture(scope="module")
def kafka_run(tmp_path_factory):
    """Run the broker once for the module; return what it wrote and what was seen while it ran."""
    _need_kafka()
    work = tmp_path_factory.mktemp("kafka")
    node = kafka_local.KafkaNode(work)
    acks = kafka_local.Acks()
    samples, timings = [], []
    by_value = lambda v: int(v) % PARTITIONS  # noqa: E731
    nums = lambda a, b: [str(i).encode() for i in range(a, b)]  # noqa: E731
    try:
        node.format()
        node.start()
        kafka_local.create_topic(node, TOPIC, PARTITIONS, {"internal.segment.bytes": "8192"})
        kafka_local.wait_for_leaders(node, TOPIC, PARTITIONS)
        kafka_local.send_one_by_one(node, TOPIC, nums(0, 450), by_value, acks)
        kafka_local.send_batched(node, TOPIC, nums(450, 1500), by_value, acks)
        kafka_local.send_batched(node, TOPIC, nums(1500, 2500), by_value, acks, **{"compression.type": "gzip"})
        _sample_log_end(node, PARTITIONS, samples, timings)
        node.stop()
        node.start()  # the partitions' leader epochs move on
        kafka_local.wait_for_leaders(node, TOPIC, PARTITIONS)
        kafka_local.send_one_by_one(node, TOPIC, nums(2500, 2650), by_value, acks, **{"enable.idempotence": True})
        kafka_local.send_batched(node, TOPIC, nums(2650, 3500), by_value, acks, **{"enable.idempotence": True})
        aborted = kafka_local.send_transactions(node, TOPIC, nums(3500, 3600), nums(3600, 3650), 0, acks)
        p = kafka_local.producer(node)
        for value, headers in ((b'"text"', None), (b"plain text", None), (None, None), (b"3650", [("h", b"v")])):
            p.produce(TOPIC, value, key=b"k", partition=1, headers=headers, on_delivery=acks)
            p.flush(30)
        del p
        _sample_log_end(node, PARTITIONS, samples, timings)
        assert not acks.errors and not aborted.errors, acks.errors + aborted.errors
        node.stop()
        assert (node.log_dir / ".kafka_cleanshutdown").exists(), node.tail()
        yield {"node": node, "acks": acks, "aborted": aborted, "samples": samples, "timings": timings}
    finally:
        node.kill()


@pytest.mark.root
@pytest.mark.slow
def test_reader_matches_acks_and_dump_log_segments(kafka_run):
    node = kafka_run["node"]
    files = {p: [Path(f) for _b, f in segments.segment_files(node.log_dir / f"{TOPIC}-{p}")]
             for p in range(PARTITIONS)}
    assert all(len(f) >= 2 for f in files.values()) and max(len(f) for f in files.values()) >= 3, files
    text = kafka_local.dump_log_segments([f for p in range(PARTITIONS) for f in files[p]])
    chunks = {p: [] for p in range(PARTITIONS)}
    current = None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = int(Path(line.split()[1]).parent.name.rsplit("-", 1)[1])
        chunks[current].append(line)
    acked = {}
    for p, offset, value in kafka_run["acks"].ok + kafka_run["aborted"].ok:
        acked[(p, offset)] = segments.decode_value(value)
    codecs, epochs = set(), set()
    for p in range(PARTITIONS):
        parsed = kafka_local.parse_dump_log_segments("\n".join(chunks[p]))
        got = check_against_dls(node.log_dir / f"{TOPIC}-{p}", parsed)
        # every acknowledged send is where its acknowledgement put it, and nothing else is there
        assert {o: v for o, _e, _c, v in got["records"]} == {o: v for (q, o), v in acked.items() if q == p}
        codecs |= {b["codec"] for b in parsed["batches"]}
        epochs |= {r[1] for r in got["records"]}
        cache = segments.read_leader_epoch_checkpoint(node.log_dir / f"{TOPIC}-{p}" / "leader-epoch-checkpoint")
        for offset, epoch, _crc, _v in got["records"]:
            assert epoch == max(e for e, start in cache if start <= offset)
        if p == 0:
            assert got["control_batches"] == 2
            aborted = sorted(o for _p, o, _v in kafka_run["aborted"].ok)
            assert [o for first, last in got["aborted"] for o in range(first, last + 1)] == aborted
    assert codecs == {"none", "gzip"}
    assert len(epochs) >= 2, epochs  # the restart moved the leader epoch


@pytest.mark.root
@pytest.mark.slow
def test_dump_of_a_cleanly_stopped_broker(kafka_run, tmp_path):
    node = kafka_run["node"]
    d = segments.dump(str(node.log_dir), TOPIC)
    assert d["broker"] == 1 and [p["partition"] for p in d["partitions"]] == list(range(PARTITIONS))
    last_hw = {s["partition"]: s["hw"] for s in kafka_run["samples"][-PARTITIONS:]}
    for p in d["partitions"]:
        # one replica, acks=all, clean shutdown: the checkpointed HW is the LEO the consumer saw
        assert p["hw"] == p["leo"] == last_hw[p["partition"]]
        assert p["log_start"] == 0 and p["hw_source"] == "replication-offset-checkpoint"
    script = tmp_path / "segments.py"
    shutil.copy(SEGMENTS_PY, script)
    out = subprocess.run([shutil.which("python3") or sys.executable, "-I", "-S", str(script),
                          str(node.log_dir), TOPIC], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(json.dumps(d))


@pytest.mark.root
@pytest.mark.slow
def test_log_end_of_the_running_broker_is_its_high_watermark(kafka_run):
    samples = kafka_run["samples"]
    assert len(samples) == 2 * PARTITIONS
    for s in samples:
        assert s["log_end"] == s["hw"], s
    # the active segment's index was preallocated, zeros after its entries
    assert any(s["index_bytes"] > s["log_bytes"] for s in samples), samples


@pytest.mark.root
@pytest.mark.slow
def test_torn_tail_and_bit_flip_on_real_segments(kafka_run, tmp_path):
    src = kafka_run["node"].log_dir / f"{TOPIC}-0"
    whole = segments.read_partition(src)
    # torn tail: the last segment cut in the middle of its last batch
    part = copy_part(src, tmp_path, "torn-0")
    seg = Path(segments.segment_files(part)[-1][1])
    last = list(segments.iter_batches(seg))[-1]
    os.truncate(seg, last["position"] + last["size"] // 2)
    got = segments.read_partition(part)
    assert got["torn_tail"] and got["leo"] == last["base"] == segments.log_end(part)
    assert got["records"] == [r for r in whole["records"] if r[0] < last["base"]]
    # a bit flip in a record of a middle segment: that batch's CRC fails, for Kafka too
    part = copy_part(src, tmp_path, "flip-0")
    seg = Path(segments.segment_files(part)[1][1])
    batch = [b for b in segments.iter_batches(seg) if not b["control"]][3]
    flip_bit(seg, batch["position"] + batch["size"] - 2, 1)
    got = segments.read_partition(part)
    assert got["bad_crc"] == [batch["base"]]
    assert got["records"] == [r for r in whole["records"] if not batch["base"] <= r[0] <= batch["last"]]
    kafka = kafka_local.parse_dump_log_segments(kafka_local.dump_log_segments([seg]))
    assert [b["base"] for b in kafka["batches"] if not b["valid"]] == [batch["base"]]

"""The corrupt fault's file surgery, run as it runs on a host (python3 -c
SOURCE JSON) on real files: exactly the bits and bytes it reports."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nemesis.corrupt import SOURCE, parse_start
from nemesis.fault import FaultArgError

pytestmark = pytest.mark.unit


def corrupt(arg: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", SOURCE, json.dumps(arg)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "p0").mkdir()
    a, b = tmp_path / "p0" / "00000.log", tmp_path / "p0" / "leader-epoch-checkpoint"
    a.write_bytes(bytes(range(256)) * 8)
    b.write_bytes(b"0\n1\n0 0\n")
    return tmp_path, {a: a.read_bytes(), b: b.read_bytes()}


def flipped_bits(before: bytes, after: bytes) -> int:
    return sum(bin(x ^ y).count("1") for x, y in zip(before, after))


def test_bitflip_flips_exactly_the_reported_bits(files):
    root, before = files
    out = corrupt({"globs": [str(root / "*" / "*")], "mode": "bitflip", "bits": 5, "seed": 7})
    assert out["files"] == 2 and len(out["changes"]) == 5
    total = sum(flipped_bits(data, path.read_bytes()) for path, data in before.items())
    assert total == 5
    for c in out["changes"]:
        assert c["file"] in {str(p) for p in before}


def test_bitflip_is_reproducible_by_seed_and_filtered_by_name(files):
    root, before = files
    arg = {"globs": [str(root / "*" / "*")], "match": "*.log", "mode": "bitflip", "bits": 3, "seed": 1}
    first = corrupt(arg)
    for path, data in before.items():
        path.write_bytes(data)
    assert corrupt(arg) == first
    assert first["changes"] and all(c["file"].endswith(".log") for c in first["changes"])


def test_bitflip_by_probability(files):
    root, before = files
    out = corrupt({"globs": [str(root / "*" / "*.log")], "mode": "bitflip", "probability": 0.01, "seed": 3})
    n = len(out["changes"])
    assert 60 < n < 220          # 16384 bits at 1%: 164 expected
    path = root / "p0" / "00000.log"
    assert flipped_bits(before[path], path.read_bytes()) == n


def test_truncate_by_bytes_and_to_a_random_length(files):
    root, before = files
    seg = root / "p0" / "00000.log"
    out = corrupt({"globs": [str(seg)], "mode": "truncate", "bytes": 100, "seed": 0})
    assert out["changes"] == [{"file": str(seg), "size": 2048, "to": 1948}]
    assert seg.read_bytes() == before[seg][:1948]
    out = corrupt({"globs": [str(seg)], "mode": "truncate", "bytes": None, "seed": 0})
    to = out["changes"][0]["to"]
    assert 0 <= to < 1948 and seg.stat().st_size == to


def test_no_matching_files_changes_nothing(tmp_path):
    assert corrupt({"globs": [str(tmp_path / "*.log")], "mode": "bitflip", "bits": 1}) == {"files": 0, "changes": []}


@pytest.mark.parametrize("arg, msg", [
    ({"node": "A", "mode": "melt"}, "mode"),
    ({"node": "A", "bits": 2, "probability": 0.1}, "bits or probability"),
    ({"node": "A", "mode": "truncate", "bits": 2}, "for mode bitflip"),
    ({"node": "A", "colour": 1}, "unknown field"),
    ({"mode": "bitflip"}, "node"),
])
def test_bad_scenario_arguments_are_one_line(arg, msg):
    with pytest.raises(FaultArgError) as e:
        parse_start(arg)
    assert msg in str(e.value) and "\n" not in str(e.value)

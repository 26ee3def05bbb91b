"""The power fault end to end on the netns backend: lazyfs under every
broker's data directory, a coordinated power failure with Kafka's default
flush (no fsync) loses the acknowledged writes, named with the ops that
acknowledged them, and nothing stays mounted afterwards."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/fuse"), reason="needs root and /dev/fuse")
def test_coordinated_power_failure_without_fsync_loses_acknowledged_writes(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp_path / "runs"),
               HARNESS_WORK_ROOT=str(tmp_path / "work"))
    out = subprocess.run([sys.executable, "-m", "harness", "scenario", "power-coordinated", "--era", "epoch",
                          "--expect", "--store", str(tmp_path / "store"), "--subnet", "10.222.50.0/24"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    store = Path(out.stdout.strip().splitlines()[-1])
    results = json.loads((store / "results.json").read_text())
    lost = results["scenario"]["unread_acknowledged"]
    history = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    acked = {(o["value"][0], o["value"][1][1]): o["index"] for o in history if o["type"] == "ok" and o["f"] == "send"}
    assert len(lost) == 100                                   # the 100 written before the failure
    for w in lost:
        assert acked[(w["key"], w["value"])] == w["op"]         # named with the op that acknowledged it
    power = [o for o in history if o["process"] == "nemesis" and o["f"] in ("power", "power-on")]
    assert [o["f"] for o in power] == ["power", "power-on"] and power[0]["value"] == ["n1", "n2", "n3"]
    mounts = Path("/proc/mounts").read_text()
    assert str(tmp_path) not in mounts
    assert not list((tmp_path / "runs").glob("*.json"))

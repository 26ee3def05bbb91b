"""The replaced-disk scenario (KAFKA-14139) on the replica, through `harness scenario`:
era hw lets a late ISR expansion put the wiped follower (empty log, new broker epoch) in the
ISR and elects it, losing the acknowledged writes; era epoch's rule isr_broker_epochs (KIP-903)
refuses that expansion and loses nothing. The history carries the disk-loss op with what was
wiped, and the partial heal of the cut to the controller."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
              pytest.mark.timeout(600)]


@pytest.mark.parametrize("era,code", [("hw", 1), ("epoch", 0)])
def test_replaced_disk(tmp_path, era, code):
    env = dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp_path / "runs"),
               HARNESS_WORK_ROOT=str(tmp_path / "work"))
    out = subprocess.run([sys.executable, "-m", "harness", "scenario", "replaced-disk", "--era", era, "--json",
                          "--store", str(tmp_path / "store"), "--subnet", "10.222.41.0/24"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=560)
    assert out.returncode == code, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["scenario"]["as_expected"] is True
    store = Path(doc["store"])
    history = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    nemesis = [o for o in history if o["process"] == "nemesis"]
    wiped = next(o for o in nemesis if o["f"] == "disk-loss")
    node = wiped["value"]["nodes"][0]
    assert wiped["value"]["wiped"][node]["files_removed"] > 0
    assert any(o["f"] == "disk-restart" and o["value"] == [node] for o in nemesis)
    assert any(o["f"] == "heal" and isinstance(o["value"], dict) and "healed" in o["value"] for o in nemesis)
    controller = (store / "nodes" / "ctl" / "controller.log").read_text()
    if era == "hw":
        assert "lost-write" in doc["checkers"]["log"]["counts"]
        assert f"-> [1, {node[1:]}]" in controller or f"-> [2, {node[1:]}]" in controller   # the late AlterIsr
    else:
        assert "ineligible" in controller

"""The late-commit scenario (systems/kafka/scenarios/kafka-late-commit.yaml, issue 37) once on a
real Kafka 4.1.1 with Kafka's Java client on transaction.version 2, as a user runs it with
`--expect`: it gives its declared verdict (valid: measured in 20 of 20 runs,
docs/findings/kafka.md), and the history shows what the scenario is about, through its txn
steps: the writer's transaction whose send waited in the paused leader's socket failed and
was aborted, its producer's epoch went up at that abort (protocol 2's bump at every
transaction's end), and the same producer's next transaction to the same key committed with
that epoch. The writer's coordinator is not the paused leader (`coordinator_not`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.kafka.kafkautil import run_scenario

SCENARIO = "kafka-late-commit"   # systems/kafka/scenarios/
pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]


def test_protocol_2_bumps_the_epoch_at_the_abort_and_the_late_send_cannot_stand_for_the_next(tmp_path):
    out = run_scenario(tmp_path, SCENARIO, "java-tv2", "10.221.37.0/24")
    assert out.returncode == 0, out.stderr[-3000:]
    store = Path(out.stdout.strip().splitlines()[-1])
    ops = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    steps = [o["value"] for o in ops if o["process"] == "scenario" and o["f"] == "step"]
    leader = next(s["bound"]["L"] for s in steps if s["action"] == "bind")
    txns = [s for s in steps if s["action"] == "txn"]
    assert len(txns) == 3
    assert txns[0]["writer"]["coordinator"] not in (None, leader), txns[0]["writer"]
    warm, late, after = (t["txn"] for t in txns)
    assert (warm["type"], late["type"], after["type"]) == ("ok", "fail", "ok"), txns
    assert warm["process"] == late["process"] == after["process"], "the same producer goes on"
    assert late["producer"]["end_epoch"] == late["producer"]["epoch"] + 1, late
    assert after["producer"] == {"id": late["producer"]["id"], "epoch": late["producer"]["end_epoch"],
                                 "end_epoch": late["producer"]["end_epoch"] + 1}, after
    results = json.loads((store / "results.json").read_text())
    assert results["checkers"]["txn"]["valid"] is True and results["scenario"]["as_expected"] is True

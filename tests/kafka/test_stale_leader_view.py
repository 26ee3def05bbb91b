"""On real brokers: a leader cut off from the controller keeps answering metadata
with itself as leader; the harness must still see the controller's new leader
(issue 42). The scenario (systems/kafka/scenarios/kafka-stale-leader-view.yaml)
cuts the leader of key 0, which is n1 and so the first broker in the bootstrap
list, from the controller and from one follower, and waits at most 8 s (the
2 s session timeout plus a few) for the other follower to lead. Before the
harness asked every broker and kept the freshest answer, that wait timed out
(exit 2) on n1's stale view."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.kafka.kafkautil import run_scenario

SCENARIO = "kafka-stale-leader-view"   # systems/kafka/scenarios/
pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]


def test_a_fenced_leaders_own_view_is_not_believed(tmp_path):
    out = run_scenario(tmp_path, SCENARIO, "4.1.1", "10.221.42.0/24", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    aliases = doc["scenario"]["aliases"]
    assert aliases["L"] == "n1"   # the first broker asked: the case that used to time out
    store = Path(doc["store"])
    # The samples say whose view each came from; while L was cut off, the view
    # kept for key 0 was never L's own.
    views = [p.get("view_from") for line in (store / "samples.jsonl").read_text().splitlines()
             for p in json.loads(line)["state"]["partitions"]]
    assert views and all(views), "every sample names whose view it is"
    assert set(views) - {"n1"}, "some sample came from a broker other than n1"

"""Tiered storage on a real netns cluster, through `harness scenario`: the
out-of-sync follower of the KIP-405 seed (scenario 2) with the object store as
its own host. B falls below the leader's local log start, gets
OFFSET_MOVED_TO_TIERED_STORAGE, rebuilds its epochs from the remote tier and
catches up; the final reads get offsets held only remotely; the remote tier is
dumped as one more copy; samples carry the local log start and remote end."""
from __future__ import annotations

import json
import os

import pytest

from tests.scenarios.test_scenario_e2e import harness, leftovers, run_dir

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
              pytest.mark.timeout(300)]


def test_out_of_sync_follower_rebuilds_from_the_remote_tier(tmp_path):
    out = harness(tmp_path, "tiered-out-of-sync-follower", "--era", "epoch", "--subnet", "10.225.9.0/24",
                  "--store", tmp_path / "store")
    assert out.returncode == 0, out.stderr[-3000:]
    store = run_dir(out)
    res = json.loads((store / "results.json").read_text())
    assert res["valid"] is True and res["scenario"]["as_expected"] is True
    b = res["scenario"]["aliases"]["B"]
    log = (store / "nodes" / b / "broker.log").read_text()
    assert "moved to tiered storage" in log and "rebuilt epochs" in log
    remote = json.loads((store / "nodes" / "remote" / "dump.json").read_text())["partitions"][0]
    dumps = [json.loads((store / "nodes" / n / "dump.json").read_text())["partitions"][0] for n in ("n1", "n2", "n3")]
    below = min(d["local_log_start"] for d in dumps)
    assert below >= 21 and remote["log_start"] == 0 and len(remote["records"]) >= below
    history = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    final = next(o["time"] for o in history if o.get("f") == "final")
    read = {r[0] for o in history if o.get("f") == "poll" and o["type"] == "ok" and o["time"] > final
            for r in (o["value"] or {}).get("0", [])}
    assert set(range(below)) <= read                     # offsets no broker holds any more
    sample = next(json.loads(line) for line in (store / "samples.jsonl").read_text().splitlines()
                  if "local_log_start" in line)
    assert "remote_end" in sample["state"]["partitions"][0]
    assert (store / "nodes" / "store" / "store.log").is_file()
    assert leftovers(json.loads((store / "test.json").read_text())["run_id"]) == []

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


def test_a_remote_segment_the_store_lost_is_reported_as_lost_writes(tmp_path):
    """The remote-store fault (mode lose) below every replica's local log start: a read
    from offset 0 fails at the hole, the final reads go past it, and the log checker
    names the three acknowledged writes there as lost (so does the replica diff)."""
    out = harness(tmp_path, "tiered-remote-segment-lost", "--era", "epoch", "--subnet", "10.225.10.0/24",
                  "--store", tmp_path / "store", "--expect")
    assert out.returncode == 0, out.stderr[-3000:]
    store = run_dir(out)
    res = json.loads((store / "results.json").read_text())
    assert res["valid"] is False and res["scenario"]["as_expected"] is True
    log = res["checkers"]["log"]
    assert log["counts"]["lost-write"] == 3 and log["counts"]["poll-skip"] == 0
    assert sorted(e["offset"] for e in log["examples"]["lost-write"]) == [3, 4, 5]
    assert res["checkers"]["replica-diff"]["counts"]["lost-acknowledged"] == 3
    history = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    fault = next(o for o in history if o.get("f") == "remote-store")
    assert (fault["value"]["lost"]["base"], fault["value"]["lost"]["end"]) == (3, 5)
    acked = {o["index"] for o in history if o.get("f") == "send" and o["type"] == "ok"}
    assert all(set(e["ops"]) & acked for e in log["examples"]["lost-write"])   # named with the acknowledging op
    final = json.loads((store / "test.json").read_text())
    assert leftovers(final["run_id"]) == []
    unreadable = [op for op in history if op.get("f") == "poll" and op["type"] == "fail" and op["time"] >
                  fault["time"] and "KAFKA_STORAGE_ERROR" in (op.get("error") or "")]
    assert unreadable                                    # the read at the hole failed, as a consumer would see

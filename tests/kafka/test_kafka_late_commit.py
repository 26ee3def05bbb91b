"""The late-commit scenario (systems/kafka/scenarios/kafka-late-commit.yaml, issue 37) once on a
real Kafka 4.1.1 with Kafka's Java client on transaction.version 1, as a user runs it with
`--expect`: it gives its declared verdict (txn-lost-write: measured in every run,
docs/findings/kafka.md), and the history and the replicas show the story the finding is
about. The writer's transaction T1 whose send was left unanswered failed and was aborted
without an epoch bump; the broker had appended T1's batch anyway, and the abort marker
follows it in every replica; the same producer's next transaction T2, with the same producer
id and epoch, was acknowledged with T1's batch's offset and committed; T2's value is in no
replica. The writer's coordinator is F1, a follower (`coordinator`), and T1 ran in the
background while L and F2 were paused and resumed (`background`, `abort_after`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.kafka.kafkautil import run_scenario

SCENARIO = "kafka-late-commit"   # systems/kafka/scenarios/
pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]


def _txn_batches(store: Path, node: str) -> list:
    """[base offset, last offset, producer id, epoch, "data" | "commit" | "abort"] of key 0."""
    found = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                found.append(v) if k == "txn_batches" else walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(json.loads((store / "nodes" / node / "dump.json").read_text()))
    assert len(found) == 1, f"{node}: one partition's txn_batches expected, found {len(found)}"
    return found[0]


def test_protocol_1_acknowledges_the_next_transaction_with_the_late_batch_offset(tmp_path):
    out = run_scenario(tmp_path, SCENARIO, "java-tv1", "10.221.37.0/24")
    assert out.returncode == 0, out.stderr[-3000:]
    store = Path(out.stdout.strip().splitlines()[-1])
    ops = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines()]
    steps = [o["value"] for o in ops if o["process"] == "scenario" and o["f"] == "step"]
    bound = next(s["bound"] for s in steps if s["action"] == "bind")
    assert set(bound) == {"L", "F1", "F2"}
    txn_steps = [s for s in steps if s["action"] == "txn"]
    assert len(txn_steps) == 3 and txn_steps[1]["txn"].get("background") is True
    assert txn_steps[0]["writer"]["coordinator"] == bound["F1"], txn_steps[0]["writer"]

    # the writer's three transactions, from their completions
    done = [o for o in ops if o["f"] == "txn" and o["type"] != "invoke"]
    assert [o["type"] for o in done] == ["ok", "fail", "ok"], done
    warm, late, after = done
    assert len({o["process"] for o in done}) == 1, "the same producer goes on"
    assert "the application aborts" in late["error"], late
    assert late["producer"]["end_epoch"] == late["producer"]["epoch"], "protocol 1: no bump at the abort"
    assert after["producer"]["id"] == late["producer"]["id"]
    assert after["producer"]["epoch"] == late["producer"]["epoch"], "T2 has T1's producer id and epoch"
    [[_send, key, [offset, value]]] = after["value"]

    # every replica: at T2's acknowledged offset, T1's batch (same producer and epoch), then T1's abort marker
    for node in ("n1", "n2", "n3"):
        batches = {b[0]: b for b in _txn_batches(store, node)}
        assert batches[offset][2:] == [late["producer"]["id"], late["producer"]["epoch"], "data"], (node, batches)
        assert batches[offset + 1][4] == "abort", (node, batches)

    results = json.loads((store / "results.json").read_text())
    txn = results["checkers"]["txn"]
    assert txn["valid"] is False and txn["counts"]["txn-lost-write"] == 1, txn
    assert results["scenario"]["as_expected"] is True
    reads = [o for o in ops if o["f"] == "poll" and o["type"] == "ok"]
    assert all(value not in [v for _o, v in (r["value"] or {}).get(str(key), [])] for r in reads), \
        f"T2's value {value} was read"

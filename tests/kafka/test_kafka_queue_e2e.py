"""`harness run --sut kafka --workload queue` end to end on a real Kafka 3.9.1
(KRaft, netns; the last release before KIP-890's transaction protocol v2, so its
cluster's transaction.version is 0), as a user runs it: Jepsen's queue ops in the
history (txn ops of 1..4 micro-ops completed with offsets, subscribe, rebalances as
assign ops), committed and aborted transactions, the consumer back at its committed
position after an abort, the log checker's verdict, the checkers that do not apply
listed as such, and each replica's transactional batches and markers with their
producer ids and epochs (dump.json's txn_batches)."""
import json
from pathlib import Path

import pytest

from tests.harness.hrun_util import read_history, run_harness
from tests.kafka.kafkautil import need_root

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(600)]


def _mop_shapes_ok(value, completed: bool) -> bool:
    if not isinstance(value, list) or not 1 <= len(value) <= 4:
        return False
    for mop in value:
        if mop[0] == "send":
            if completed and not (len(mop) == 3 and isinstance(mop[2], list) and len(mop[2]) == 2
                                  and isinstance(mop[2][0], int)):
                return False
        elif mop[0] == "poll":
            if completed != (len(mop) == 2) or (completed and not isinstance(mop[1], dict)):
                return False
        else:
            return False
    return True


def test_queue_run_on_kafka(tmp_path):
    need_root()
    out = run_harness(tmp_path, "run", "--sut", "kafka", "--option", "version=3.9.1", "--workload", "queue",
                      "--workload-option", "abort_p=0.5",
                      "--keys", "2", "--concurrency", "3", "--rate", "30", "--time-limit", "25", "--seed", "3",
                      "--subnet", "10.221.13.0/24", "--store", tmp_path / "s", timeout=500)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    store = Path(out.stdout.strip().splitlines()[-1])
    results = json.loads((store / "results.json").read_text())
    assert results["checkers"]["log"]["valid"] is True, results["checkers"]["log"]
    for name in ("replica-diff", "linearizability"):
        assert results["checkers"][name]["applies"] is False and "workload 'queue'" in results["checkers"][name]["note"]
    assert results["checkers"]["txn"]["valid"] is True, results["checkers"]["txn"].get("counts")
    assert results["checkers"]["txn"]["transactions"]["committed"] > 0
    counts = results["workload_counts"]
    assert counts["committed"] > 0 and counts["aborted"] > 0 and counts["rebalances"] > 0, counts

    ops = read_history(store)
    client = [op for op in ops if op["process"] != "nemesis"]
    txns = [op for op in client if op["f"] == "txn"]
    assert txns and all(_mop_shapes_ok(op["value"], completed=op["type"] == "ok") for op in txns
                        if op["type"] in ("invoke", "ok"))
    assert {op["type"] for op in txns} >= {"invoke", "ok", "fail"}
    assert any(op.get("error") == "aborted on purpose" for op in txns)
    assert any(op["f"] == "subscribe" and op["type"] == "ok" and op["value"] == [0, 1] for op in client)
    assert any(op["f"] == "assign" and op["type"] == "ok" and op["value"] for op in client), "no rebalance recorded"

    # After an aborted transaction that read key k from offset o, the process's next
    # poll of k (no reassignment between) starts at o again: the consumer went back.
    rewinds = 0
    last_fail: dict = {}
    for op in client:
        p = op["process"]
        if op["f"] in ("assign", "subscribe"):
            last_fail.pop(p, None)
        if op["f"] != "txn" or op["type"] not in ("ok", "fail"):
            continue
        polled: dict = {}
        for mop in op["value"]:
            if mop[0] == "poll" and len(mop) == 2:
                for k, pairs in mop[1].items():
                    if pairs:
                        polled.setdefault(int(k), pairs)
        before = last_fail.get(p, {})
        for key, pairs in polled.items():
            if key in before:
                assert pairs[0][0] == before[key], (op, before)
                rewinds += 1
        last_fail[p] = {k: pairs[0][0] for k, pairs in polled.items()} if op["type"] == "fail" else {}
    assert rewinds > 0, "no aborted read was followed by a read of the same key"

    test = json.loads((store / "test.json").read_text())
    assert test["system_options"]["version"] == "3.9.1" and test["system_options"]["transaction_version"] == 0
    assert results["client"]["cluster_transaction_version"] == 0 and results["client"]["client"] == "librdkafka"
    # the brokers' side of each transaction: data batches and the markers that ended them, per producer
    dumps = [json.loads(p.read_text()) for p in sorted((store / "nodes").glob("n*/dump.json"))]
    batches = [b for d in dumps for part in d["partitions"] for b in part.get("txn_batches", [])]
    assert {b[4] for b in batches} == {"data", "commit", "abort"}, batches[:5]
    assert all(b[2] >= 0 and b[3] >= 0 for b in batches)
    for d in dumps:
        for part in d["partitions"]:
            aborted = {tuple(r) for r in part["aborted"]}
            ended: dict = {}   # producer id -> its data batches since its last marker
            for first, last, pid, _epoch, kind in part.get("txn_batches", []):
                if kind == "data":
                    ended.setdefault(pid, []).append((first, last))
                else:   # a marker ends every open batch of its producer, aborted iff it is an abort
                    assert all((r in aborted) == (kind == "abort") for r in ended.pop(pid, [])), (pid, kind)

"""`harness run --sut kafka --workload queue --option client=java` end to end on a real
Kafka 4.1.1 (KRaft, netns), as a user runs it, each process's transactional producer and
read_committed consumer served by the run's one client JVM (QueueProcess.java): a short
run without faults, subscribed, ends valid with committed and aborted transactions and a
rebalance, and names the client, its version and the transaction protocol its producers
used; an assigned run whose client JVM is SIGKILLed mid-run ends the transactions in flight
as `info` (their processes never used again), the processes that lost their producer with
the JVM `fail` (fenced) and retire, the run goes on in a new JVM and ends valid, and nothing
is left behind (no JVM, nothing for `harness cleanup`)."""
import html
import json
from pathlib import Path

import pytest

from tests.harness.hrun_util import read_history, run_harness
from tests.kafka.kafkautil import need_root
from tests.kafka.test_kafka_java_run_e2e import _alive, run_killing_the_client_jvm

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(600)]
SUBNET = "10.221.39.0/24"


def _run_args(tmp_path, seed: int, consumer: str, time_limit: int, *options: str) -> list:
    return ["run", "--sut", "kafka", "--option", "client=java", *options, "--workload", "queue",
            "--workload-option", "abort_p=0.4", "--workload-option", f"consumer={consumer}", "--keys", "2",
            "--concurrency", "3", "--rate", "30", "--time-limit", str(time_limit), "--seed", str(seed),
            "--subnet", SUBNET, "--store", tmp_path / "s"]


def test_a_subscribed_java_queue_run_ends_valid_with_commits_aborts_and_a_rebalance(tmp_path):
    need_root()
    out = run_harness(tmp_path, *_run_args(tmp_path, 3, "subscribe", 15), timeout=500)
    assert out.returncode == 0, out.stderr[-3000:]
    store = Path(out.stdout.strip().splitlines()[-1])
    results = json.loads((store / "results.json").read_text())
    assert results["valid"] is True
    assert results["checkers"]["log"]["valid"] is True and results["checkers"]["txn"]["valid"] is True
    counts = results["workload_counts"]
    assert counts["committed"] > 0 and counts["aborted"] > 0 and counts["rebalances"] > 0, counts

    ops = read_history(store)
    txns = [o for o in ops if o["f"] == "txn" and o["type"] != "invoke"]
    assert any(o["type"] == "fail" and o.get("error") == "aborted on purpose" for o in txns)
    committed = [o for o in txns if o["type"] == "ok"]
    assert any(m[0] == "send" and isinstance(m[2][0], int) for o in committed for m in o["value"])
    assert any(m[0] == "poll" and any(m[1].values()) for o in committed for m in o["value"]), "no committed read"
    assert any(o["f"] == "subscribe" and o["type"] == "ok" for o in ops)

    test = json.loads((store / "test.json").read_text())
    assert test["system_options"]["client"] == "java" and test["system_options"]["client_version"] == "4.1.1"
    client = results["client"]
    assert client["client"] == "java" and client["version"] == "kafka-clients 4.1.1", client
    # 4.1.1 brokers finalize transaction.version 2 on a fresh cluster, and a 4.x client speaks it
    assert set(client["transaction_protocol"]) == {"2"}, client
    assert sum(client["transaction_protocol"].values()) == counts["committed"], (client, counts)
    assert test["system_options"]["transaction_version"] == 2 and client["cluster_transaction_version"] == 2
    report = html.unescape((store / "report.html").read_text())
    assert "Client: java kafka-clients 4.1.1; transaction protocol: 2 (" in report
    assert "the cluster's transaction.version: 2" in report
    # each transaction's producer id and epoch (the TransactionManager's, by reflection); protocol 2
    # bumps the epoch at every EndTxn, so a transaction ends one epoch above its records'
    ended = [o for o in txns if o["type"] == "ok" or o.get("error") == "aborted on purpose"]
    assert ended and all(o["producer"]["id"] >= 0 for o in ended), ended[:3]
    wrote = [o for o in ended if any(m[0] == "send" for m in o["value"])]   # an empty one sends no EndTxn
    assert wrote and all(o["producer"]["end_epoch"] == o["producer"]["epoch"] + 1 for o in wrote), wrote[:3]
    for process in {o["process"] for o in ended}:   # one producer id per process, its epoch rising
        mine = [o["producer"] for o in ended if o["process"] == process]
        assert len({p["id"] for p in mine}) == 1 and [p["epoch"] for p in mine] == sorted(p["epoch"] for p in mine)


def test_a_java_queue_run_whose_jvm_is_killed_mid_run_leaves_info_and_nothing_behind(tmp_path):
    """On a cluster formatted with transaction.version 1: the 4.x client speaks protocol 1 there."""
    need_root()
    returncode, out, err, killed, killed_at, seen = run_killing_the_client_jvm(
        tmp_path, _run_args(tmp_path, 5, "assign", 25, "--option", "transaction_version=1"), "txn", 8, timeout=400)
    assert killed is not None, f"the run's client JVM never showed ({seen}): {err[-3000:]}"
    assert returncode == 0, err[-3000:]
    store = Path(out.strip().splitlines()[-1])
    results = json.loads((store / "results.json").read_text())
    assert results["valid"] is True and results["checkers"]["txn"]["valid"] is True

    ops = read_history(store)
    lost = [o for o in ops if o["type"] != "invoke" and "client JVM exited" in str(o.get("error"))]
    assert any(o["f"] == "txn" for o in lost), lost
    assert all(o["type"] == "info" for o in lost if o["f"] == "txn"), lost
    gone = [o for o in ops if o["type"] != "invoke" and "client JVM is gone" in str(o.get("error"))]
    assert all(o["type"] == "fail" for o in gone), gone   # refused before anything was sent
    for o in lost + gone:   # Jepsen's rule: a process whose op is info (or fenced) is never used again
        later = [p for p in ops if p["process"] == o["process"] and p["index"] > o["index"]]
        assert not later, (o, later[:2])
    after = [o for o in ops[killed_at:] if o["f"] == "txn" and o["type"] == "ok"]
    assert after, "the run went on in a new client JVM"
    assert set(results["client"]["transaction_protocol"]) == {"1"}, results["client"]
    assert results["client"]["cluster_transaction_version"] == 1
    committed = [o for o in ops if o["f"] == "txn" and o["type"] == "ok"]
    assert all(o["producer"]["end_epoch"] == o["producer"]["epoch"] for o in committed), committed[:3]   # no bump
    assert len(seen) >= 2, f"a new JVM after the kill: {seen}"
    final = [o for o in ops if o["f"] == "final-reads"][-1]["value"]
    assert final["complete"], final   # the killed producers' open transactions were aborted by their coordinator

    assert not [p for p in seen if _alive(p)], "no client JVM outlives the run"
    run_id = json.loads((store / "test.json").read_text())["run_id"]
    left = run_harness(tmp_path, "cleanup", "--run", run_id, timeout=120)
    assert left.returncode == 0 and "cleanup: 0 resources removed" in left.stdout, left.stdout + left.stderr

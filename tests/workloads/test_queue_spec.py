"""The queue workload's declaration: registered beside `log`, its options validated,
and refused in one line, exit 2, before any host exists, by every system (or system
version) that lacks the capability it needs (TRANSACTIONS): a capability, not a name."""
from __future__ import annotations

import json

import pytest

from harness import registry
from harness.spec import SpecError, build_spec
from harness.sut import TRANSACTIONS
from tests.harness.hrun_util import run_harness

pytestmark = pytest.mark.unit


def test_registered_beside_log_with_its_need_and_options():
    assert {"log", "queue"} <= set(registry.names(registry.WORKLOADS))
    queue = registry.workload("queue")
    assert queue.needs == {TRANSACTIONS}
    assert queue.parse_options({}).model_dump() == {"txn": True, "consumer": "subscribe", "abort_p": 0.1,
                                                    "max_txn_len": 4}


@pytest.mark.parametrize("system, options, why", [
    ("replica", {}, "no transactions"),
    ("nats", {}, "no transactions"),
    ("kafka", {"version": "0.10.2.2"}, "came with 0.11"),
])
def test_systems_without_transactions_refuse_it(system, options, why):
    with pytest.raises(SpecError) as e:
        build_spec(None, system=system, system_options=options, workload="queue")
    msg = str(e.value)
    assert "\n" not in msg and f"system {system!r} does not support 'transactions'" in msg and why in msg


@pytest.mark.parametrize("version", ["0.11.0.3", "2.8.2", "4.1.1"])
def test_kafka_since_0_11_takes_it(version):
    spec = build_spec(None, system="kafka", system_options={"version": version}, workload="queue",
                      workload_options={"consumer": "assign", "txn": False})
    assert spec.workload_options == {"txn": False, "consumer": "assign", "abort_p": 0.1, "max_txn_len": 4}


def test_the_refusal_comes_from_the_capability_not_the_name():
    """A system registered at run time without TRANSACTIONS is refused the same way;
    given the capability, it is accepted."""
    import dataclasses

    kafka = registry.system("kafka")
    without = dataclasses.replace(kafka, name="kafka-like", capabilities_for=lambda settings, options: {
        **kafka.capabilities_for(settings, options), TRANSACTIONS: ""})
    with_it = dataclasses.replace(kafka, name="kafka-like-txn")
    registry.register(registry.SYSTEMS, "kafka-like", without)
    registry.register(registry.SYSTEMS, "kafka-like-txn", with_it)
    try:
        with pytest.raises(SpecError, match="'kafka-like' does not support 'transactions'"):
            build_spec(None, system="kafka-like", workload="queue")
        assert build_spec(None, system="kafka-like-txn", workload="queue").workload == "queue"
    finally:
        registry.unregister(registry.SYSTEMS, "kafka-like")
        registry.unregister(registry.SYSTEMS, "kafka-like-txn")


@pytest.mark.parametrize("options, expected", [
    ({"consumer": "group"}, "workload_options: consumer: got 'group'"),
    ({"abort_p": 2}, "workload_options: abort_p"),
    ({"max_txn_len": 0}, "workload_options: max_txn_len"),
    ({"txns": True}, "workload_options: txns: unknown field"),
])
def test_bad_options_are_one_line(options, expected):
    with pytest.raises(SpecError) as e:
        build_spec(None, system="kafka", workload="queue", workload_options=options)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_log_takes_no_workload_options():
    with pytest.raises(SpecError, match="workload 'log' takes no options; leave out txn"):
        build_spec(None, workload="log", workload_options={"txn": True})


def test_cli_refuses_before_any_host_exists(tmp_path):
    out = run_harness(tmp_path, "run", "--sut", "kafka", "--variant", "0.10.2.2", "--workload", "queue",
                      "--store", tmp_path / "s", timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "no transactions" in out.stderr, out.stderr
    assert not (tmp_path / "s").exists() and not (tmp_path / "work").exists()
    out = run_harness(tmp_path, "run", "--workload", "queue", "--workload-option", "consumer=x",
                      "--sut", "kafka", "--store", tmp_path / "s", timeout=60)
    assert out.returncode == 2 and "consumer" in out.stderr


def test_replica_diff_and_linearizability_do_not_apply_to_its_histories(tmp_path):
    from checkers.check_store import not_applicable

    (tmp_path / "test.json").write_text(json.dumps({"system": "kafka", "workload": "queue"}))
    skipped = not_applicable(str(tmp_path))
    assert set(skipped) == {"replica-diff", "linearizability"}
    assert all(why.startswith("workload 'queue': ") for why in skipped.values())
    (tmp_path / "test.json").write_text(json.dumps({"system": "kafka", "workload": "log"}))
    assert not_applicable(str(tmp_path)) == {}


def test_the_workloads_counts_reach_results_json(tmp_path):
    """results.json repeats test.json's final_reads.counts as workload_counts."""
    from harness import verdict

    ops = [{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 1], ["poll"]]},
           {"index": 1, "time": 2, "process": 0, "type": "ok", "f": "txn",
            "value": [["send", 0, [0, 1]], ["poll", {"0": [[0, 1]]}]]},
           {"index": 2, "time": 3, "process": "nemesis", "type": "info", "f": "final", "value": None},
           {"index": 3, "time": 4, "process": 1, "type": "invoke", "f": "poll", "value": None},
           {"index": 4, "time": 5, "process": 1, "type": "ok", "f": "poll", "value": {"0": [[0, 1]]}}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    counts = {"committed": 1, "aborted": 0, "indefinite": 0, "rebalances": 2}
    (tmp_path / "test.json").write_text(json.dumps({"system": "kafka", "workload": "queue",
                                                    "final_reads": {"complete": True, "counts": counts}}))
    results = verdict.check_store(tmp_path)
    assert results["workload_counts"] == counts
    assert json.loads((tmp_path / "results.json").read_text())["workload_counts"] == counts
    assert results["checkers"]["log"]["valid"] is True


def test_the_client_and_its_transaction_protocol_reach_results_json_and_the_report(tmp_path):
    """The final reads' `client` (the DB's client_info) is results.json's `client`, and the
    report's Transactions section says it in one line."""
    from harness import verdict
    from reports.transactions import client_text, section

    client = {"client": "java", "version": "kafka-clients 4.1.1", "transaction_protocol": {"2": 3},
              "source": "the producer's internals"}
    ops = [{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 1]]},
           {"index": 1, "time": 2, "process": 0, "type": "ok", "f": "txn", "value": [["send", 0, [0, 1]]]},
           {"index": 2, "time": 3, "process": "nemesis", "type": "info", "f": "final-reads",
            "value": {"complete": True, "keys": {}, "counts": {"committed": 1}, "client": client}}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(op, separators=(",", ":")) + "\n" for op in ops))
    (tmp_path / "test.json").write_text(json.dumps({"system": "kafka", "workload": "queue"}))
    results = verdict.check_store(tmp_path)
    assert results["client"] == client
    assert section(results).client == ("java kafka-clients 4.1.1; transaction protocol: 2 (3 commits) "
                                       "(read from the producer's internals)")
    assert client_text({"client": "librdkafka", "version": "librdkafka 2.16.0",
                        "transaction_protocol": "not exposed by librdkafka"}) == \
        "librdkafka librdkafka 2.16.0; transaction protocol: not exposed by librdkafka"
    assert client_text({"client": "java", "version": "kafka-clients 4.1.1", "transaction_protocol": {}}) == \
        "java kafka-clients 4.1.1; transaction protocol: no transaction committed"
    assert client_text(None) == ""
    assert client_text({"client": "java", "version": "kafka-clients 4.1.1", "transaction_protocol": {"1": 2},
                        "cluster_transaction_version": 1}) == \
        "java kafka-clients 4.1.1; transaction protocol: 1 (2 commits); the cluster's transaction.version: 1"


@pytest.mark.parametrize("name", ["false-alarms-kafka-queue.yaml", "false-alarms-kafka-queue-idempotent.yaml",
                                  "kafka-transactions.yaml"])
def test_the_queue_campaigns_pass_the_preflight(name):
    """A campaign's workload options are checked against its workload (not against `log`),
    so the queue workload's campaign files start."""
    from harness.campaign.execute import Options, preflight
    from harness.campaign.spec import load_campaign

    from pathlib import Path

    path = str(Path(__file__).resolve().parents[2] / "systems" / "kafka" / "campaigns" / name)
    campaign = load_campaign(path)
    assert campaign.workloads == ["queue"]
    preflight(campaign, path, Options())

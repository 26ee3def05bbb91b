"""check_store on store dirs as the harness leaves them, including partial ones."""

import json

import pytest

from history.formats import HistoryError
from checkers.linearizability import same_verdicts
from checkers.check_store import StoreError, check_store
from harness import verdict
from tests.checkers import log_dumps, log_histories

pytestmark = pytest.mark.unit


def make_store(root, ops, dumps, extra_nodes=()):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "history.jsonl", "w") as handle:
        for op in ops:
            handle.write(json.dumps(op) + "\n")
    for node, dump in dumps.items():
        (root / "nodes" / node).mkdir(parents=True)
        (root / "nodes" / node / "dump.json").write_text(json.dumps(dump))
    for node in extra_nodes:
        (root / "nodes" / node).mkdir(parents=True)
        (root / "nodes" / node / "broker.log").write_text("started\n")
    return root


def test_clean_store_is_valid_and_results_json_is_written(tmp_path):
    store = make_store(tmp_path / "s", log_histories.clean().ops, log_dumps.agreeing(),
                       extra_nodes=["ctl"])  # the controller has no dump; that is fine
    results = verdict.check_store(store)  # the checkers, then the one results.json writer
    again = check_store(str(store))  # the same, but for the time the linearizability search took
    assert same_verdicts(again.pop("checkers")) == same_verdicts(results["checkers"])
    # the verdict adds the time to first anomaly (harness/verdict.first_times): none here
    assert again == {k: v for k, v in results.items() if k not in ("checkers", "first_anomaly_s")}
    assert results["first_anomaly_s"] is None
    assert results["valid"] is True
    assert json.loads((store / "results.json").read_text()) == results
    assert set(results["checkers"]) == {"log", "replica-diff", "linearizability"}
    assert results["stats"]["ops"] == len(log_histories.clean().ops)
    assert "notes" not in results


def test_anomalies_make_the_store_invalid(tmp_path):
    store = make_store(tmp_path / "s", log_histories.lost_write().ops, log_dumps.divergent())
    results = check_store(str(store))
    assert results["valid"] is False
    assert results["checkers"]["log"]["counts"]["lost-write"] == 1
    assert results["checkers"]["replica-diff"]["counts"]["divergence"] == 1


def test_truncated_last_line_is_skipped_and_noted(tmp_path):
    ops = log_histories.clean().ops
    store = make_store(tmp_path / "s", ops, log_dumps.agreeing())
    with open(store / "history.jsonl", "a") as handle:
        handle.write('{"index": 99, "type": "ok", "f": "se')
    results = check_store(str(store))
    assert results["valid"] is True
    assert results["stats"]["ops"] == len(ops)
    assert any("cut off" in note for note in results["notes"])


def test_a_bad_line_in_the_middle_is_an_error_naming_the_file_and_line(tmp_path):
    store = make_store(tmp_path / "s", log_histories.clean().ops, log_dumps.agreeing())
    lines = (store / "history.jsonl").read_text().splitlines()
    lines[3] = "{not json"
    lines.append('{"index": 99, "type": "ok", "f": "se')
    (store / "history.jsonl").write_text("\n".join(lines))
    with pytest.raises(HistoryError, match=r"history\.jsonl:4:"):
        check_store(str(store))


def test_missing_dumps_make_the_diff_unknown_not_an_error(tmp_path):
    dumps = log_dumps.agreeing()
    del dumps["n3"]
    store = make_store(tmp_path / "s", log_histories.clean().ops, dumps, extra_nodes=["n3"])
    results = check_store(str(store))
    assert results["checkers"]["log"]["valid"] is True
    assert results["checkers"]["replica-diff"]["valid"] is True  # nothing found in n1, n2
    lost = make_store(tmp_path / "t", log_histories.clean().ops,
                      {k: v for k, v in log_dumps.lost_acknowledged().items() if k != "n3"},
                      extra_nodes=["n3"])
    results = check_store(str(lost))
    assert results["checkers"]["replica-diff"]["valid"] == "unknown"
    assert results["valid"] == "unknown"
    assert any("n3" in note for note in results["notes"])


def test_no_nodes_at_all_leaves_the_diff_unknown(tmp_path):
    store = make_store(tmp_path / "s", log_histories.clean().ops, {})
    results = check_store(str(store))
    assert results["checkers"]["replica-diff"]["valid"] == "unknown"
    assert results["valid"] == "unknown"


def test_missing_history_and_unknown_engine_are_clear_errors(tmp_path):
    with pytest.raises(StoreError, match="no history"):
        check_store(str(tmp_path))
    with pytest.raises(StoreError, match="--engine local or --engine spark"):
        check_store(str(tmp_path), engine="flink")

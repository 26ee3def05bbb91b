"""Spark-engine store checks write the same checker results as the local engine."""

import json

import pytest

from checkers.linearizability import same_verdicts
from checkers.check_store import StoreError, check_campaign, check_store
from harness import verdict
from tests.checkers import log_dumps, log_histories
from tests.checkers.test_store import make_store

pytestmark = pytest.mark.timeout(1200)  # Spark jobs on a loaded 2-core machine; tiers: on each test


@pytest.mark.spark
def test_spark_campaign_matches_local_on_a_partial_store_and_skips_a_bad_one(spark, tmp_path):
    dumps = {k: v for k, v in log_dumps.divergent().items() if k != "n3"}
    store = make_store(tmp_path / "s", log_histories.poll_skip().ops, dumps, extra_nodes=["n3"])
    with open(store / "history.jsonl", "a") as handle:
        handle.write('{"index": 999, "process": 1, "ty')  # the harness died mid-line
    empty = tmp_path / "empty"
    empty.mkdir()
    local = check_store(str(store), engine="local")
    found = verdict.check_stores([str(store), str(empty)], skip_bad=True)  # checks and writes results.json
    remote = found[str(store)]
    assert remote["engine"] == "spark" and local["engine"] == "local"
    assert same_verdicts(remote["checkers"]) == same_verdicts(local["checkers"])
    assert (remote["valid"], remote["stats"], remote["notes"]) == (
        local["valid"], local["stats"], local["notes"])
    assert json.loads((store / "results.json").read_text()) == remote
    assert remote["checkers"]["log"]["counts"]["poll-skip"] == 1
    assert remote["checkers"]["replica-diff"]["valid"] is False  # n1 and n2 diverge
    assert (store / "parquet" / "sends.parquet").exists()
    assert found[str(empty)]["valid"] == "unknown" and "no history" in found[str(empty)]["error"]


@pytest.mark.unit
def test_spark_engine_reports_a_store_without_history_before_starting_spark(tmp_path):
    with pytest.raises(StoreError, match="no history"):
        check_store(str(tmp_path), engine="spark")


@pytest.mark.spark
def test_spark_engine_reuses_parquet_until_the_history_changes(spark, tmp_path):
    store = make_store(tmp_path / "s", log_histories.lost_write().ops, log_dumps.agreeing())
    first = check_store(str(store), engine="spark")
    made = (store / "parquet" / "made.json").stat().st_mtime_ns
    tables = (store / "parquet" / "reads.parquet").stat().st_mtime_ns
    second = check_store(str(store), engine="spark")
    assert same_verdicts(second["checkers"]) == same_verdicts(first["checkers"])
    assert (store / "parquet" / "reads.parquet").stat().st_mtime_ns == tables  # not rewritten
    history = store / "history.jsonl"
    history.write_text("".join(json.dumps(op) + "\n" for op in log_histories.clean().ops))
    again = check_store(str(store), engine="spark")
    assert (store / "parquet" / "made.json").stat().st_mtime_ns != made
    assert first["checkers"]["log"]["counts"]["lost-write"] == 1
    assert again["checkers"]["log"]["counts"]["lost-write"] == 0

"""check_store with the Spark engine writes the same checker results as the local engine."""

import json

from checkers.store import check_store
from tests.checkers import log_dumps, log_histories
from tests.checkers.test_store import make_store


def test_spark_store_matches_local_on_a_partial_store(spark, tmp_path):
    dumps = {k: v for k, v in log_dumps.divergent().items() if k != "n3"}
    store = make_store(tmp_path / "s", log_histories.poll_skip().ops, dumps, extra_nodes=["n3"])
    with open(store / "history.jsonl", "a") as handle:
        handle.write('{"index": 999, "process": 1, "ty')  # the harness died mid-line
    local = check_store(str(store), engine="local")
    remote = check_store(str(store), engine="spark")
    assert remote["engine"] == "spark" and local["engine"] == "local"
    assert remote["checkers"] == local["checkers"]
    assert (remote["valid"], remote["stats"], remote["notes"]) == (
        local["valid"], local["stats"], local["notes"])
    assert json.loads((store / "results.json").read_text()) == remote
    assert remote["checkers"]["log"]["counts"]["poll-skip"] == 1
    assert remote["checkers"]["replica-diff"]["valid"] is False  # n1 and n2 diverge
    assert (store / "parquet" / "sends.parquet").exists()

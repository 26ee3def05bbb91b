"""check_store with the Spark engine writes the same checker results as the local engine."""

from checkers.store import check_campaign, check_store
from tests.checkers import log_dumps, log_histories
from tests.checkers.test_store import make_store


def test_spark_store_and_campaign_match_local(spark, tmp_path):
    first = make_store(tmp_path / "a", log_histories.poll_skip().ops, log_dumps.divergent())
    second = make_store(tmp_path / "b", log_histories.realtime_order().ops,
                        {k: v for k, v in log_dumps.lost_acknowledged().items() if k != "n2"},
                        extra_nodes=["n2"])
    local = {d: check_store(str(d), engine="local") for d in (first, second)}
    remote = check_store(str(first), engine="spark")
    assert remote["checkers"] == local[first]["checkers"]
    assert remote["valid"] is False and remote["engine"] == "spark"
    campaign = check_campaign([str(first), str(second)])
    for store in (first, second):
        assert campaign[str(store)]["checkers"] == local[store]["checkers"]
        assert campaign[str(store)]["stats"] == local[store]["stats"]
    assert campaign[str(second)]["notes"] == local[second]["notes"]

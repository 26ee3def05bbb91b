"""Spark and in-process drivers give identical results (log anomalies and replica diff).

All cases run as one campaign: each hand-made history (clean, and one per
anomaly type) paired with one set of replica dumps is a run, and one Spark
job checks them all, which also exercises the many-runs path.
"""

import pytest

from checkers import log_anomalies, parquet, replica_diff
from checkers.spark_check import check_runs
from tests.checkers import log_dumps, log_histories

DUMPS = [log_dumps.agreeing, log_dumps.divergent, log_dumps.missing_committed,
         log_dumps.lost_acknowledged]


def cases():
    """run name -> (ops, dumps); every history and every dump variant appear."""
    histories = {"clean": log_histories.clean, **log_histories.ANOMALOUS}
    out = {}
    for i, (name, make) in enumerate(sorted(histories.items())):
        dumps = DUMPS[i % len(DUMPS)]
        out[f"{name}+{dumps.__name__}"] = (make().ops, dumps())
    out["no-dumps"] = (log_histories.clean().ops, {})
    return out


@pytest.fixture(scope="module")
def campaign(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign")
    runs = cases()
    dirs = []
    for run, (ops, dumps) in runs.items():
        out = root / run
        parquet.write_run(str(out), run, ops, dumps)
        dirs.append(str(out))
    return runs, check_runs(dirs, list(runs), spark=spark)


def test_every_anomaly_type_is_injected_somewhere(campaign):
    runs, found = campaign
    seen = {kind for r in found.values() for kind, n in r["log"]["counts"].items() if n}
    seen |= {kind for r in found.values() for kind, n in r["replica-diff"]["counts"].items() if n}
    assert seen == set(log_anomalies.ANOMALIES) | set(replica_diff.ANOMALIES)


@pytest.mark.parametrize("run", sorted(cases()))
def test_spark_equals_local(campaign, run):
    runs, found = campaign
    ops, dumps = runs[run]
    assert found[run]["log"] == log_anomalies.check(ops)
    assert found[run]["replica-diff"] == replica_diff.check(dumps, ops)

"""Both engines agree on the txn checker: every hand-made history (tests/data/txn) and
a synthetic history with every anomaly injected, checked as one Spark campaign and
in-process, give identical results (counts, examples, cycles and their words)."""
import pytest

from bench.engines import txn_synthetic
from history import parquet
from history.flatten import flatten
from history.formats import read_history
from checkers.spark.engine import check_runs
from checkers.txn_anomalies import check_flat
from tests.checkers.txn_cases import EXPECTED, path

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]


def test_spark_and_in_process_agree_on_every_history(spark, tmp_path):
    histories = {name: read_history(path(name)) for name in sorted(EXPECTED)}
    histories["synthetic"] = list(txn_synthetic.history(2000, seed=3))
    dirs, runs = [], []
    for name, ops in histories.items():
        out = tmp_path / name
        parquet.write_run(str(out), name, ops, {})
        dirs.append(str(out))
        runs.append(name)
    found = check_runs(dirs, runs, spark=spark, names={"txn"})
    for name, ops in histories.items():
        flat = flatten(ops)
        local = check_flat(flat[0], flat[1], flat.ends)
        assert found[name]["txn"] == local, name
        if name in EXPECTED:
            counts, valid = EXPECTED[name]
            assert {k: n for k, n in local["counts"].items() if n} == counts
    injected = found["synthetic"]["txn"]["counts"]
    assert all(injected[kind] for kind in txn_synthetic.INJECTED), injected

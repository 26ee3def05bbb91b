"""`harness bench` end to end on a small size: both drivers agree and every injected kind is found."""

import pytest

from checkers import bench, log_anomalies, replica_diff

pytestmark = pytest.mark.timeout(1200)  # Spark jobs on a loaded 2-core machine


def test_bench_drivers_agree_and_find_every_injected_kind(spark, tmp_path):
    report = bench.run_bench(sizes=[6000], keys=14, out_dir=str(tmp_path), local_max_ops=6000,
                             inject=1, seed=5, progress=lambda _line: None)
    entry, = report["runs"]
    assert entry["local"]["same_as_spark"] is True and entry["local"]["same_linearizability"] is True
    found = set(entry["spark"]["log_counts"]) | set(entry["spark"]["diff_counts"])
    assert found == set(log_anomalies.ANOMALIES) | set(replica_diff.ANOMALIES)
    assert entry["spark"]["rows_scanned"] == sum(entry["rows"].values())

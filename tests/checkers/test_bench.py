"""`harness bench` end to end on a small size: both drivers agree and every injected kind is found."""

import pytest

from checkers import log_anomalies, replica_diff
from bench.engines import from_jsonl, synthetic

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]  # Spark jobs on a loaded 2-core machine


def test_bench_drivers_agree_and_find_every_injected_kind(spark, tmp_path):
    report = synthetic.run_bench(sizes=[6000], keys=14, out_dir=str(tmp_path), local_max_ops=6000,
                             inject=1, seed=5, progress=lambda _line: None)
    entry, = report["runs"]
    assert entry["local"]["same_as_spark"] is True and entry["local"]["same_linearizability"] is True
    found = set(entry["spark"]["log_counts"]) | set(entry["spark"]["diff_counts"])
    assert found == set(log_anomalies.ANOMALIES) | set(replica_diff.ANOMALIES)
    assert entry["spark"]["rows_scanned"] == sum(entry["rows"].values())
    assert int(entry["spark"]["java"].split(".")[0]) >= 17   # which Java the figures are of
    # where the check's time goes: its tasks' profile (the kernels), beside the driver's
    tasks = entry["profile_top"]["spark_check_tasks"]
    assert any(part in e["function"] for e in tasks for part in ("key_pass", "_arrays", "linear/")), tasks


def test_bench_from_jsonl_times_every_step_and_finds_the_injected_writes(spark, tmp_path):
    entry, = from_jsonl.run_jsonl_bench([5000], keys=12, out_dir=str(tmp_path), inject=1, seed=2,
                                       progress=lambda _line: None)
    assert abs(entry["lines"] - 5000) < 100, entry  # generate_jsonl sizes the final phase ahead
    for step in ("convert", "check", "anomalies_diff", "linearizability", "end_to_end"):
        assert entry[step]["seconds"] >= 0 and entry[step]["baseline_s"] >= 0, step
    # generate_jsonl loses offset 1 of key 0 and reads offset 1 of key 1 only before the final phase
    assert entry["log_counts"]["lost-write"] == 1 and entry["log_counts"]["read-then-lost"] == 1
    assert entry["linearizability"]["valid"] is False
    assert entry["linearizability"]["invalid_keys"] == [0, 1]
    assert entry["profile_top"]["check_tasks"] and entry["profile_top"]["check_driver"]
    assert int(entry["java"].split(".")[0]) >= 17

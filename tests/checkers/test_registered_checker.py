"""A checker registered at run time (here, in the test) is run by both engines
and has its section in results.json: with its verdict where it has a driver,
and "unknown" with a note under Spark where it has none, never absent."""

import json
from types import SimpleNamespace

import pytest

from checkers.checker import Checker
from history.flatten import SEND_COLUMNS
from harness import registry, verdict
from tests.checkers import log_dumps, log_histories
from tests.checkers.test_store import make_store

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]


def _acks(data) -> dict:
    """In-process kernel: the number of acknowledged sends (valid if there is one)."""
    acked = sum(1 for send in data.sends if send[SEND_COLUMNS.index("type")] == "ok")
    return {"valid": acked > 0, "counts": {"acknowledged": acked}}


def check(job) -> dict:
    """Spark driver (this module): the same count over the sends table, per run."""
    from pyspark.sql import functions as F

    from checkers.spark.tables import run_of

    acks = job.tables.raw("sends").where((F.col("type") == "ok") & F.col("offset").isNotNull())
    rows = acks.groupBy(run_of(F.col("k")).alias("rid")).count().collect()
    acked = {run: 0 for run in job.runs}
    for row in rows:
        acked[job.runs[row["rid"]]] = row["count"]
    return {run: {"valid": n > 0, "counts": {"acknowledged": n}} for run, n in acked.items()}


@pytest.fixture
def fourth_checkers():
    both = Checker("acks-both", "acknowledged sends, both engines", _acks, spark=__name__)
    local = Checker("acks-local", "acknowledged sends, in-process only", _acks)
    for checker in (both, local):
        registry.register(registry.CHECKERS, checker.name, checker)
    yield
    for checker in (both, local):
        registry.unregister(registry.CHECKERS, checker.name)


def test_a_checker_registered_in_a_test_is_in_results_json_under_both_engines(fourth_checkers, spark, tmp_path):
    store = make_store(tmp_path / "s", log_histories.clean().ops, log_dumps.agreeing())
    acked = sum(1 for op in log_histories.clean().ops if op.get("type") == "ok" and op.get("f") == "send")
    for engine in ("local", "spark"):
        verdict.check_store(store, engine=engine)
        written = json.loads((store / "results.json").read_text())["checkers"]
        assert set(written) == {"log", "replica-diff", "linearizability", "acks-both", "acks-local"}, engine
        assert written["acks-both"] == {"valid": True, "counts": {"acknowledged": acked}}, engine
        if engine == "local":
            assert written["acks-local"] == written["acks-both"]
        else:
            assert written["acks-local"] == {"valid": "unknown", "note": "no spark driver"}


def test_registration_checks_the_checker_protocol():
    with pytest.raises(registry.RegistryError, match="registered under 'other'"):
        registry.register(registry.CHECKERS, "other", Checker("acks", "x", _acks))
    with pytest.raises(registry.RegistryError, match="unknown capabilities"):
        registry.register(registry.CHECKERS, "acks", Checker("acks", "x", _acks, needs=("telepathy",)))
    with pytest.raises(registry.RegistryError, match="has no 'check'"):
        registry.register(registry.CHECKERS, "acks", SimpleNamespace(name="acks", description="x", needs=()))
    with pytest.raises(registry.RegistryError, match="already registered"):
        registry.register(registry.CHECKERS, "log", registry.checker("log"))
    assert "acks" not in registry.names(registry.CHECKERS)


def test_a_check_of_only_checkers_without_a_spark_driver_gives_their_notes(fourth_checkers, spark, tmp_path):
    """No driver takes part (no key pass, no DataFrame job): each checker is "unknown" with its note."""
    from checkers.spark.engine import check_runs
    from history.parquet import write_run

    write_run(str(tmp_path / "pq"), "r", iter(log_histories.clean().ops), log_dumps.agreeing())
    found = check_runs([str(tmp_path / "pq")], ["r"], spark=spark, names={"acks-local"})
    assert found == {"r": {"acks-local": {"valid": "unknown", "note": "no spark driver"}}}

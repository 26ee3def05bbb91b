"""`harness check` on a scenario store whose results.json was deleted gives the same
verdict and scenario section (issue 38, criterion 2), on the scenario stores the suite
carries (tests/data/stores), with either engine. Every scenario store the cluster tests
make gets the same check (tests/conftest.py, `scenario_stores_rebuild`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.rebuild import is_scenario_store, rebuild_problem

STORES = Path(__file__).resolve().parents[1] / "data" / "stores"
SCENARIO_STORES = sorted(p for p in STORES.iterdir() if is_scenario_store(p))


@pytest.mark.unit
def test_the_suite_carries_a_scenario_store():
    assert SCENARIO_STORES, "tests/data/stores has no scenario store"


@pytest.mark.unit
@pytest.mark.parametrize("store", SCENARIO_STORES, ids=lambda p: p.name)
def test_harness_check_rebuilds_the_verdict_and_the_scenario_section(store):
    assert rebuild_problem(store) is None


@pytest.mark.spark
@pytest.mark.timeout(900)   # a Spark session on a shared 2-core machine
@pytest.mark.parametrize("store", SCENARIO_STORES, ids=lambda p: p.name)
def test_the_spark_engine_rebuilds_them_too(store, spark):
    """The CLI in this process, on the suite's one Spark session (`spark`)."""
    assert rebuild_problem(store, engine="spark", in_process=True) is None

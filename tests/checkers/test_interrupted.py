"""A store whose run was interrupted before the final reads (issue 14).

What needs the final reads cannot be decided: `unseen` (acknowledged sends
above the last read) and the replica diff's `lost-acknowledged` are reported
under `unknown` with the reason, the verdict is unknown (exit 2), and the
other checks still report what they find. Before, `harness check` said
unseen, exit 1. Both engines.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from checkers.check_store import check_campaign, check_store
from tests.checkers import log_dumps, log_histories
from tests.checkers.test_store import make_store

pytestmark = pytest.mark.timeout(1200)  # Spark jobs on a loaded 2-core machine; tiers: on each test


def interrupted_with_aborted_read():
    h = log_histories.body()
    h.poll(4, {1: [(0, 200), (1, 201), (2, 202)]})  # 202's send failed
    h.send(0, 1, 203, 3)                              # not read yet when the run stopped
    return h


def check(store, engine):
    if engine == "local":
        return check_store(str(store))
    return check_campaign([str(store)])[str(store)]


@pytest.mark.parametrize("engine", [pytest.param("local", marks=pytest.mark.unit),
                                    pytest.param("spark", marks=pytest.mark.spark)])
def test_interrupted_run_is_unknown_with_the_reason(request, tmp_path, engine):
    if engine == "spark":
        request.getfixturevalue("spark")
    store = make_store(tmp_path / "s", log_histories.interrupted().ops, log_dumps.agreeing())
    results = check(store, engine)
    log, diff = results["checkers"]["log"], results["checkers"]["replica-diff"]
    assert results["valid"] == "unknown"
    assert log["valid"] == "unknown" and not any(log["counts"].values())
    assert log["unknown"]["unseen"]["count"] == 1 and log["unknown"]["unseen"]["keys"] == [1]
    assert "final reads did not complete" in log["unknown"]["unseen"]["reason"]
    assert diff["valid"] == "unknown" and diff["counts"]["lost-acknowledged"] == 0
    assert diff["unknown"]["lost-acknowledged"]["count"] == 1
    assert "final reads did not complete" in diff["unknown"]["lost-acknowledged"]["reason"]


@pytest.mark.parametrize("engine", [pytest.param("local", marks=pytest.mark.unit),
                                    pytest.param("spark", marks=pytest.mark.spark)])
def test_other_checks_still_report_what_they_find(request, tmp_path, engine):
    if engine == "spark":
        request.getfixturevalue("spark")
    store = make_store(tmp_path / "s", interrupted_with_aborted_read().ops, log_dumps.agreeing())
    results = check(store, engine)
    log = results["checkers"]["log"]
    assert results["valid"] is False
    assert log["counts"]["aborted-read"] == 1 and log["counts"]["unseen"] == 0
    assert log["unknown"]["unseen"]["count"] == 1


@pytest.mark.unit
def test_harness_check_exits_2_on_an_interrupted_store(tmp_path):
    store = make_store(tmp_path / "s", log_histories.interrupted().ops, log_dumps.agreeing())
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(store)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "valid=unknown" in proc.stdout and "final reads did not complete" in proc.stdout


@pytest.mark.unit
def test_the_same_history_read_to_its_end_is_judged(tmp_path):
    """Control: with the final phase, the very same sends are unseen (exit 1)."""
    h = log_histories.interrupted()
    store = make_store(tmp_path / "s", log_histories.finish(h).ops, log_dumps.agreeing())
    results = check_store(str(store))
    assert results["checkers"]["log"]["counts"]["unseen"] == 1
    assert "unknown" not in results["checkers"]["log"]
    assert results["checkers"]["replica-diff"]["counts"]["lost-acknowledged"] == 1

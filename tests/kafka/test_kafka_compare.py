"""`harness scenario --compare` (systems/kafka/compare.py): the table of the
replica's eras against the Kafka release of each, built from the results.json
of real runs (tests/data/compare/: kafka-hw-data-loss on 0.10.2.2 and
0.11.0.3, kafka-fast-failover on 2.8.2, run on 2026-11-26 with --sut kafka)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from systems.kafka import compare

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "tests" / "data" / "compare"


def test_summary_of_real_runs():
    # stores written before the scenario finding was renamed (lost_writes -> unread_acknowledged)
    lost = compare.summary(STORE / "kafka-hw-data-loss-0.10.2.2" / "20261126T204959")
    assert (lost["verdict"], lost["unread"], lost["divergent"]) == (False, 2, 0)
    kept = compare.summary(STORE / "kafka-hw-data-loss-0.11.0.3" / "20261126T205337")
    assert (kept["verdict"], kept["unread"], kept["divergent"]) == (True, 0, 0)
    ff = compare.summary(STORE / "kafka-fast-failover-2.8.2" / "20261126T210412")
    assert ff["verdict"] is True and ff["divergent"] == 0   # y1 lost (allowed: unclean election, acks=1)


def test_table_rows_per_era_and_release():
    rows = {(r["scenario"], r["era"], r["kafka"]): r for r in compare.table(STORE)}
    # the tiered pairs: the epoch era and Kafka 4.1.1 only; replaced-disk: hw and kip101 beside
    # 2.8.2, epoch beside 4.1.1
    assert len(rows) == 3 * 4 + 3 + 3
    assert rows[("tiered-fresh-follower", "epoch", "4.1.1")]["model"] == "not run"
    assert rows[("hw-data-loss", "hw", "0.10.2.2")]["real"] == "invalid 1/1"
    assert rows[("hw-data-loss", "kip101", "0.11.0.3")]["real"] == "valid 1/1"
    assert rows[("hw-data-loss", "hw", "0.10.2.2")]["model"] == "not run"
    assert rows[("hw-data-loss", "hw", "0.10.2.2")]["agree"] is None
    text = compare.render(list(rows.values()))
    assert text.splitlines()[0].startswith("| scenario | replica era | Kafka |") and len(text.splitlines()) == 20


def test_cli_from_store_and_unknown_name():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "harness", "scenario", "--compare", "hw-data-loss", "--from-store",
                          "--store", str(STORE)], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode == 0 and "| hw-data-loss | hw | 0.10.2.2 | not run" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "harness", "scenario", "--compare", "nope", "--from-store",
                          "--store", str(STORE)], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "hw-data-loss" in bad.stderr


def test_runs_nested_in_a_campaign_store_count_too(tmp_path):
    """A campaign's store nests a scenario's runs (runs/<cell>/run-N/attempt-K/<name>-<variant>/<ts>/):
    the table finds them there as well as at the top."""
    import shutil

    run = STORE / "kafka-hw-data-loss-0.10.2.2" / "20261126T204959"
    for n in (1, 2):
        nested = tmp_path / "runs" / "scenario-kafka-hw-data-loss-0.10.2.2" / f"run-{n}" / "attempt-1"
        shutil.copytree(run, nested / "kafka-hw-data-loss-0.10.2.2" / run.name)
    shutil.copytree(run, tmp_path / "kafka-hw-data-loss-0.10.2.2" / run.name)
    assert [r["verdict"] for r in compare.runs_of(tmp_path, "kafka-hw-data-loss", "0.10.2.2")] == [False] * 3
    assert compare.runs_of(tmp_path, "kafka-hw-data-loss", "0.11.0.3") == []

"""The engine of a campaign's final check (`--engine auto`, the default): in-process under
128 MiB of history, Spark from it or when a master is named; a wrong name is one line, exit 2."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.campaign import check
from harness.campaign.check import CheckError, choose_engine

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "tests" / "data" / "stores" / "hw-kill-seed11"
pytestmark = pytest.mark.unit


@pytest.fixture
def stores(tmp_path):
    copies = [tmp_path / f"run-{i}" for i in range(2)]
    for copy in copies:
        shutil.copytree(STORE, copy)
    return copies


def test_small_histories_are_checked_in_process(stores, monkeypatch):
    monkeypatch.delenv("CHECKERS_SPARK_MASTER", raising=False)
    engine, why = choose_engine(stores)
    assert engine == "local" and "MiB of history, under 128 MiB" in why


def test_large_histories_or_a_named_master_go_to_spark(stores, monkeypatch):
    monkeypatch.delenv("CHECKERS_SPARK_MASTER", raising=False)
    size = sum((s / "history.jsonl").stat().st_size for s in stores)
    monkeypatch.setattr(check, "AUTO_SPARK_BYTES", size)       # the sum reaches the threshold
    assert choose_engine(stores)[0] == "spark"
    monkeypatch.setattr(check, "AUTO_SPARK_BYTES", size + 1)
    assert choose_engine(stores)[0] == "local"
    assert choose_engine(stores, master="spark://127.0.0.1:7077") == ("spark", "auto: a Spark master is named")
    monkeypatch.setenv("CHECKERS_SPARK_MASTER", "local[1]")
    assert choose_engine(stores)[0] == "spark"
    assert choose_engine(stores, "local")[0] == "local"       # a named engine wins


def test_a_wrong_engine_is_refused(stores):
    with pytest.raises(CheckError, match="use auto, spark or local"):
        choose_engine(stores, "sprak")
    out = subprocess.run([sys.executable, "-m", "harness", "campaign", "check", str(stores[0].parent),
                          "--engine", "sprak"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--engine 'sprak'" in lines[0] and "auto, spark, local" in lines[0], out.stderr


def test_a_failed_spark_job_is_one_line_with_its_cause():
    """A Py4JJavaError's first line names only the call; the one line keeps the worker's cause."""
    class Py4JJavaError(Exception):
        pass

    text = ("An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
            ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 "
            "times, most recent failure: Lost task 0.0 in stage 3.0 (TID 3) (127.0.0.1 executor 0): "
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            '  File "/w/pyspark/worker.py", line 1, in main\n'
            "ModuleNotFoundError: No module named 'checkers.log_arrays'\n\n"
            "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:572)\n"
            "Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n")
    line = check.failure_line(Py4JJavaError(text))
    assert "\n" not in line and line.startswith("Py4JJavaError: An error occurred while calling")
    assert line.endswith("ModuleNotFoundError: No module named 'checkers.log_arrays'")
    lost = ("An error occurred while calling o91.collectToPython.\n"
            "org.apache.spark.SparkException: Job aborted\n"
            "Caused by: org.apache.spark.SparkException: Executor 0 lost\n")
    assert check.failure_line(Py4JJavaError(lost)).endswith("Caused by: org.apache.spark.SparkException: Executor 0 lost")
    assert check.failure_line(ValueError("no Java on PATH")) == "ValueError: no Java on PATH"

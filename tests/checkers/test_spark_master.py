"""An unreachable Spark master is bad input: one line naming it and the fix, exit 2.

Before: `check-history` printed a Python and a Java traceback after ~65 s and
exited 1 (the code of "not linearizable"); `check` printed 48 lines.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from history.formats import write_jsonl
from checkers.spark.session import MASTER_CONNECT_TIMEOUT
from tests.checkers.log_histories import clean

pytestmark = pytest.mark.spark

DEAD = "spark://127.0.0.1:1"  # loopback port 1: nothing listens there


def harness(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CHECKERS_SPARK_MASTER"}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert DEAD in lines[0] and "--master local[2]" in lines[0], lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    write_jsonl(clean().ops, tmp_path / "history.jsonl")
    return tmp_path


def test_check_history_with_a_dead_master_is_one_line_and_exit_2(store):
    assert_one_line_error(harness("check-history", str(store / "history.jsonl"), "--model", "log",
                                  "--engine", "spark", "--master", DEAD))


def test_check_with_a_dead_master_is_one_line_and_exit_2(store):
    assert_one_line_error(harness("check", str(store), "--engine", "spark", "--master", DEAD))
    assert not (store / "parquet").exists()  # nothing was converted before the master was asked


def test_the_connection_timeout_is_a_few_seconds():
    assert 1 <= MASTER_CONNECT_TIMEOUT <= 5

"""The CLI's quick commands load nothing heavy: `harness check-history`, `--help` and
`--version` import no pyspark, pandas or matplotlib (issue 40: a command that people
run by hand on one history answers at once; matplotlib alone costs most of a second).

Each command runs as its own process with `-X importtime`, and the test reads the
names of every module that process imported from its stderr."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("pyspark", "pandas", "matplotlib")
# What a command's start paid for without using it: pydantic (typer 0.29's parameter coercion),
# importlib.metadata (installed entry points, for help texts no one asked for).
START = {"pydantic", "importlib.metadata"}
EDN = REPO / "tests" / "data" / "knossos" / "cas-register" / "bad" / "bad-analysis.edn"


def imported(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", *args],
                         capture_output=True, text=True, cwd=cwd, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    return out, names


def heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names if n.split(".")[0] in HEAVY)


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The check itself can fail: `harness report` on nothing still loads the report's plots."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import reports.perf_plots"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "matplotlib" in heavy(names)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["check-history", "--help"]])
def test_help_and_version_import_nothing_heavy(tmp_path, args):
    out, names = imported(args, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "typer" in names  # the probe saw the imports
    assert heavy(names) == []
    if args != ["--version"]:  # the version is read from the installed metadata
        assert names & START == set()


def test_check_history_imports_nothing_heavy(tmp_path):
    history = tmp_path / EDN.name
    shutil.copy(EDN, history)
    out, names = imported(["check-history", "--model", "cas-register:0", str(history)], tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]  # the corpus's known-bad history
    assert "NOT linearizable" in out.stdout
    assert "checkers.linear.wgl" in names
    assert heavy(names) == []
    assert names & START == set()

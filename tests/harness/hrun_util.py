"""Helpers for tests that run the whole harness as a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def harness_env(tmp_path: Path) -> dict:
    """Records and scratch folders of test runs stay inside tmp_path."""
    return dict(os.environ, PYTHONPATH=str(REPO), CI="true",
                HARNESS_RUN_DIR=str(tmp_path / "runs"), HARNESS_WORK_ROOT=str(tmp_path / "work"))


def harness_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "harness", *map(str, args)]


def run_harness(tmp_path: Path, *args, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(harness_cmd(*args), capture_output=True, text=True, cwd=tmp_path,
                          env=harness_env(tmp_path), timeout=timeout)


def read_history(store: Path) -> list[dict]:
    return [json.loads(l) for l in (store / "history.jsonl").read_text().splitlines() if l.strip()]

"""Helpers for tests that run the whole harness as a subprocess."""
from __future__ import annotations

import json
import os
import signal
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
    """The harness run to its end. One that outlives `timeout` gets Ctrl-C (so it tears its
    cluster down, as a user's would) and the test fails with where it was: the tail of its
    stderr and of every harness.log under tmp_path (subprocess.run's kill left servers
    behind and said nothing of why)."""
    proc = subprocess.Popen(harness_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=harness_env(tmp_path))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        logs = "".join(f"\n--- {log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                       for log in sorted(Path(tmp_path).rglob("harness.log")))
        raise AssertionError(f"harness {' '.join(map(str, args))} did not end in {timeout:g} s "
                             f"(interrupted, exit {proc.returncode})\n--- stderr:\n{err[-3000:]}{logs}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def read_history(store: Path) -> list[dict]:
    return [json.loads(l) for l in (store / "history.jsonl").read_text().splitlines() if l.strip()]

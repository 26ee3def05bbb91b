"""Does `harness check` rebuild a scenario store's verdict and scenario section from
the store alone? (Issue 38, criterion 2: the history is the run's one record.)

A copy of the store is checked with its results.json deleted, so the store a
test still reads is left as it was."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEFT_OUT = ("results.json", "report.html", "parquet")


def is_scenario_store(store: Path) -> bool:
    """A store a scenario run checked: scenario.json with what the variant declares ("judged",
    which the `scenario` checker rebuilds from) beside a results.json with a scenario section.
    A report test's hand-written scenario section has no "judged" and is not one."""
    try:
        spec = json.loads((store / "scenario.json").read_text())
        return (isinstance(spec, dict) and isinstance(spec.get("judged"), dict)
                and "scenario" in json.loads((store / "results.json").read_text()))
    except (OSError, ValueError):
        return False


def rebuild_problem(store: Path, engine: str = "local", in_process: bool = False) -> str | None:
    """None when `harness check` on a copy without results.json gives the same verdict, exit
    code and scenario section; else what differs, in one line. `in_process`: the CLI runs in
    this process (typer's CliRunner), so a Spark check uses the test session's Spark (a
    subprocess starts a JVM of its own: about a minute of CPU on two cores, measured)."""
    before = json.loads((store / "results.json").read_text())
    with tempfile.TemporaryDirectory(prefix="rebuild-") as tmp:
        copy = Path(tmp) / store.name
        shutil.copytree(store, copy, ignore=shutil.ignore_patterns(*LEFT_OUT), symlinks=True)
        argv = ["check", str(copy), "--engine", engine]
        if in_process:
            from typer.testing import CliRunner

            from harness.cli import app

            out = CliRunner().invoke(app, argv)
            returncode, stderr = out.exit_code, f"{out.output[-500:]} {out.exception!r}"
        else:
            env = dict(os.environ, PYTHONPATH=str(REPO))
            done = subprocess.run([sys.executable, "-m", "harness", *argv],
                                  capture_output=True, text=True, cwd=tmp, env=env, timeout=600)
            returncode, stderr = done.returncode, done.stderr[-500:]
        try:
            after = json.loads((copy / "results.json").read_text())
        except (OSError, ValueError):
            return f"{store}: harness check wrote no results.json (exit {returncode}): {stderr}"
    want = {True: 0, False: 1}.get(before["valid"], 2)
    if returncode != want:
        return f"{store}: harness check exits {returncode}, the run's verdict {before['valid']!r} is {want}"
    if after.get("valid") != before["valid"]:
        return f"{store}: rebuilt verdict {after.get('valid')!r} != the run's {before['valid']!r}"
    if after.get("scenario") != before["scenario"]:
        keys = sorted(k for k in set(after.get("scenario") or {}) | set(before["scenario"])
                      if (after.get("scenario") or {}).get(k) != before["scenario"].get(k))
        return f"{store}: the rebuilt scenario section differs in {keys}"
    return None

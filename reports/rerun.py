"""What the index shows of each run besides its verdict: how long it ran, its seed, and
the command that runs it again (the spec's fields as flags, so it can be pasted)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

# test.json field -> flag of `harness run`; the rest of a spec is either derived or per-run
RUN_FLAGS = {"system": "--system", "era": "--era", "nemesis": "--nemesis",
             "nemesis_interval": "--nemesis-interval", "time_limit": "--time-limit", "seed": "--seed",
             "nodes": "--nodes", "keys": "--keys", "concurrency": "--concurrency", "rate": "--rate",
             "acks": "--acks", "backend": "--backend"}


def _flag_value(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def rerun_command(test: dict, scenario: dict | None) -> str:
    """``harness scenario NAME --era E`` for a scenario run, else ``harness run`` with the spec's flags."""
    if isinstance(scenario, dict) and scenario.get("name"):
        argv = ["harness", "scenario", str(scenario["name"])]
        era = scenario.get("era") or test.get("era") or (test.get("system_options") or {}).get("era")
        if era:
            argv += ["--era", str(era)]
        if test.get("backend") not in (None, "netns"):
            argv += ["--backend", str(test["backend"])]
        return shlex.join(argv)
    argv = ["harness", "run"]
    options = test.get("system_options") if isinstance(test.get("system_options"), dict) else {}
    for field, flag in RUN_FLAGS.items():
        value = test.get(field, options.get(field))
        if value is None or value == [] or (field == "system" and value == "replica"):
            continue
        if isinstance(value, dict) or (field == "nodes" and not isinstance(value, int)):
            continue  # an older spec shape: not a flag value
        argv += [flag, _flag_value(value)]
    settings = test.get("settings")
    for key, value in sorted(settings.items()) if isinstance(settings, dict) else []:
        argv += ["--set", f"{key}={_flag_value(value)}"]
    return shlex.join(argv)


def duration_s(history: Path) -> float | None:
    """Seconds from the start to the last op: the ``time`` of the history's last line
    (read from the end of the file, so the index stays quick on big runs)."""
    try:
        with open(history, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            t = json.loads(line).get("time")
        except (ValueError, AttributeError):
            continue
        if isinstance(t, int):
            return t / 1e9
    return None

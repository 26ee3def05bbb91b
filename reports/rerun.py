"""What the index shows of each run besides its verdict: how long it ran, its seed, and
the command that runs it again (the spec's fields as flags, so it can be pasted)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from harness.registry import DEFAULT_SYSTEM

# test.json field -> flag of `harness run`; the rest of a spec is either derived or per-run
RUN_FLAGS = {"system": "--system", "variant": "--variant", "nemesis": "--nemesis",
             "nemesis_interval": "--nemesis-interval", "time_limit": "--time-limit", "seed": "--seed",
             "nodes": "--nodes", "keys": "--keys", "concurrency": "--concurrency", "rate": "--rate",
             "acks": "--acks", "backend": "--backend"}


def _variant(test: dict, scenario: dict | None):
    """The run's variant: test.json's `variant` (older stores: `era`, or the scenario's)."""
    sc = scenario if isinstance(scenario, dict) else {}
    return test.get("variant") or test.get("era") or sc.get("variant")


def _flag_value(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def rerun_command(test: dict, scenario: dict | None) -> str:
    """``harness scenario NAME --variant V`` for a scenario run, else ``harness run`` with the spec's flags."""
    test = {**test, "variant": _variant(test, scenario)}
    if isinstance(scenario, dict) and scenario.get("name"):
        argv = ["harness", "scenario", str(scenario["name"])]
        if test["variant"]:
            argv += ["--variant", str(test["variant"])]
        if test.get("backend") not in (None, "netns"):
            argv += ["--backend", str(test["backend"])]
        return shlex.join(argv)
    argv = ["harness", "run"]
    options = test.get("system_options") if isinstance(test.get("system_options"), dict) else {}
    for field, flag in RUN_FLAGS.items():
        value = test.get(field, options.get(field))
        if value is None or value == [] or (field == "system" and value == DEFAULT_SYSTEM):
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

"""Running `harness campaign` as a user would: a subprocess with its own
run records and scratch space, and the JUnit schema."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
XSD = Path(__file__).parent / "junit-10.xsd"
sys.path.insert(0, str(REPO / "tests" / "reports"))


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")


def campaign_env(tmp: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp / "runs"),
                HARNESS_WORK_ROOT=str(tmp / "work"))


def campaign_argv(file: Path | str, store: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "harness", "campaign", "run", str(file), "--store", str(store), *more]


def campaign_folders(store: Path, name: str) -> list[Path]:
    return sorted(p for p in (store / "campaigns" / name).iterdir() if (p / "plan.json").is_file())


def events(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line.strip()]


def junit_schema():
    import xmlschema
    return xmlschema.XMLSchema(str(XSD))

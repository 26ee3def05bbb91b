"""Shared fixtures of the report tests: synthetic stores and their reports (the browser fixture is in tests/conftest.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import reports

sys.path.insert(0, str(Path(__file__).parent))

from reports_synthetic import make_store  # noqa: E402


@pytest.fixture(scope="session")
def store_root(tmp_path_factory) -> Path:
    """A store root with a lossy era-hw run and a valid era-epoch run."""
    root = tmp_path_factory.mktemp("store")
    make_store(root, test="hw-data-loss", era="hw", lossy=True, n_ops=3000, start="20261121T190000")
    make_store(root, test="hw-data-loss", era="epoch", lossy=False, n_ops=3000, start="20261121T191500", seed=2)
    return root


@pytest.fixture(scope="session")
def lossy_store(store_root) -> Path:
    return store_root / "hw-data-loss" / "20261121T190000"


@pytest.fixture(scope="session")
def valid_store(store_root) -> Path:
    return store_root / "hw-data-loss" / "20261121T191500"


@pytest.fixture(scope="session")
def lossy_report(lossy_store) -> Path:
    """The lossy store's report, built once for every test that reads it."""
    return Path(reports.build_report(lossy_store))


@pytest.fixture(scope="session")
def valid_report(valid_store) -> Path:
    return Path(reports.build_report(valid_store))


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory) -> Path:
    """Where screenshots go: REPORT_SCREENSHOTS if set (to look at them), else a temp dir."""
    path = os.environ.get("REPORT_SCREENSHOTS")
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        return Path(path)
    return tmp_path_factory.mktemp("screenshots")

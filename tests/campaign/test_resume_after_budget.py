"""`--resume` continues a campaign that its budget stopped with runs left, not only one
that was killed: the campaign's runs stay one campaign across nights or sessions."""
from __future__ import annotations

import pytest

from harness.campaign.folder import CampaignFolder, latest_unfinished

pytestmark = pytest.mark.unit


def _folder(tmp_path, name="budget-t"):
    file = tmp_path / f"{name}.yaml"
    file.write_text(f"name: {name}\n")
    plan = {"name": name, "cells": [{"id": "c", "runs": [{"id": "c/seed-1"}, {"id": "c/seed-2"}]}]}
    return CampaignFolder.create(tmp_path / "store", name, str(file), plan)


def test_a_campaign_its_budget_stopped_is_resumable(tmp_path):
    folder = _folder(tmp_path)
    folder.append({"event": "run-start", "run": "c/seed-1", "attempt": 1, "pid": 1})
    folder.append({"event": "run-end", "run": "c/seed-1", "attempt": 1, "exit": 0, "complete": True})
    folder.append({"event": "stop", "why": "budget spent", "left": ["c/seed-2"]})
    folder.append({"event": "finished", "exit": 1})
    found = latest_unfinished(tmp_path / "store", "budget-t")
    assert found is not None and found.path == folder.path


def test_a_campaign_with_every_run_done_is_not(tmp_path):
    folder = _folder(tmp_path)
    for seed in (1, 2):
        folder.append({"event": "run-start", "run": f"c/seed-{seed}", "attempt": 1, "pid": 1})
        folder.append({"event": "run-end", "run": f"c/seed-{seed}", "attempt": 1, "exit": 0, "complete": True})
    folder.append({"event": "finished", "exit": 0})
    assert latest_unfinished(tmp_path / "store", "budget-t") is None

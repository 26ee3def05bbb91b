"""results.json has one reader and one writer (harness/run_store.py): no other module
names the file, so its location and its tolerant reading are decided once; and the
verdict lattice (false > unknown > true) is `checkers.checker.merge_valid`."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from checkers.checker import merge_valid
from tests.architecture.test_imports import modules

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OWNER = "harness.run_store"
STORE_FILES = ("results.json", "scenario-results.json")


def _names_the_file(path: Path) -> list[int]:
    """Lines of string constants that are a store file's name (docstrings are prose, not paths)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and node.value.rsplit("/", 1)[-1] in STORE_FILES]


def test_only_the_store_module_names_results_json():
    found = {mod: lines for mod, path in modules().items() if mod != OWNER and (lines := _names_the_file(path))}
    assert found == {}, "use harness.run_store.read_results / has_results / RESULTS"
    assert _names_the_file(modules()[OWNER])  # the check can fail: the owner does name it


@pytest.mark.parametrize("verdicts, merged", [
    ([], True), ([True, True], True), ([True, "unknown"], "unknown"), (["unknown", False, True], False),
    ([None], "unknown"), ([False], False),
])
def test_merge_valid_is_the_lattice_false_unknown_true(verdicts, merged):
    assert merge_valid(verdicts) is merged if isinstance(merged, bool) else merge_valid(verdicts) == merged
    assert merge_valid(reversed(verdicts)) == merged  # order does not matter


def test_old_stores_are_read_under_the_current_names(tmp_path):
    """A store written before a scenario finding was renamed (tests/data/compare/ names it
    `lost_writes`) reads as `unread_acknowledged` through every reader of harness.run_store."""
    import json

    from harness import run_store

    old = REPO / "tests" / "data" / "compare" / "kafka-hw-data-loss-0.10.2.2" / "20261126T204959"
    assert "lost_writes" in json.loads((old / "results.json").read_text())["scenario"]  # still the old name on disk
    section = run_store.read_results(old)["scenario"]
    assert "lost_writes" not in section and len(section["unread_acknowledged"]) == 2
    assert run_store.read_scenario_section(old)["unread_acknowledged"] == section["unread_acknowledged"]
    assert list(section).index("unread_acknowledged") == list(
        json.loads((old / "results.json").read_text())["scenario"]).index("lost_writes")  # same place
    copy = tmp_path / "legacy"
    copy.mkdir()
    (copy / "scenario-results.json").write_text((old / "results.json").read_text())
    assert run_store.read_legacy_scenario_results(copy)["scenario"]["unread_acknowledged"]
    assert section["variant"] == "0.10.2.2" and "era" not in section   # the axis's old name, read as variant
    assert run_store.RENAMED_SCENARIO_KEYS == {"lost_writes": "unread_acknowledged", "era": "variant"}

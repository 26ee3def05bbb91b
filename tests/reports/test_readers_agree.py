"""One definition per finding (issue 38, criterion 1): on every store the suite carries
(tests/data/stores), and on each with a committed record changed on one replica (an
injected divergence), the report's diff grid and a scenario's section say what the
checkers say: the same divergent offsets (committed or only in uncommitted tails, in
the leader epoch alone), the same lost writes. They read the checkers' results; this
test holds them to it."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness import verdict
from reports import build_report
from reports.diff_grid import differences_by_key, grids
from reports.store_reader import read_store

pytestmark = pytest.mark.unit

STORES = sorted(p for p in (Path(__file__).resolve().parents[1] / "data" / "stores").iterdir() if p.is_dir())
LOSSES = ("lost-write", "unseen", "read-then-lost")


def _copy(store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / store.name
    shutil.copytree(store, copy, ignore=shutil.ignore_patterns("results.json", "report.html", "parquet"))
    return copy


def _inject_divergence(store: Path) -> tuple[int, int]:
    """Change the value of one committed record of the first replica holding one; -> (key, offset)."""
    for dump_path in sorted(store.glob("nodes/*/dump.json")):
        dump = json.loads(dump_path.read_text())
        for part in dump.get("partitions", []):
            for record in part.get("records", []):
                if record[0] < part["hw"]:
                    record[3] = "injected"
                    dump_path.write_text(json.dumps(dump))
                    return part["partition"], record[0]
    raise AssertionError(f"{store}: no committed record to change")


def _agree(store: Path) -> dict:
    results = verdict.check_store(store)
    diff = results["checkers"]["replica-diff"]
    listed = diff["differences"]
    assert diff["differences_total"] == len(listed)           # nothing cut off: every offset is compared
    committed = {(d["key"], d["offset"]) for d in listed if d["committed"]}
    assert len(committed) == diff["counts"]["divergence"]
    assert {(e["key"], e["offset"]) for e in diff.get("examples", {}).get("divergence", [])} <= committed

    # the report's grid, as report.py builds it, and the page it renders
    dumps = read_store(store).dumps
    built = {g.key: g for g in grids(dumps, sorted({d["key"] for d in listed}),
                                     differences_by_key(read_store(store).results, dumps))}
    assert {(k, o) for k, g in built.items() for o in g.divergent} == committed
    assert {(k, o) for k, g in built.items() for o in g.differing} == \
        {(d["key"], d["offset"]) for d in listed if not d["committed"]}
    assert {(k, o) for k, g in built.items() for o in g.epoch_only} == \
        {(d["key"], d["offset"]) for d in listed if d["committed"] and d["differs_in"] == "epoch"}
    page = Path(build_report(store)).read_text()
    for key in {k for k, _o in committed}:
        n = sum(1 for k, _o in committed if k == key)
        assert re.search(rf"Partition {key}: {n} divergent offset\(s\)", page), key

    sc = results.get("scenario")
    if sc is not None:
        assert [(d["key"], d["offset"], d["committed"]) for d in sc["divergence"]] == \
            [(d["key"], d["offset"], d["committed"]) for d in listed]
        log = results["checkers"]["log"]
        lost = sc["unread_acknowledged"]
        assert len(lost) == sum(log["counts"][name] for name in LOSSES)
        assert {(e["key"], e["offset"]) for name in LOSSES for e in log.get("examples", {}).get(name, [])} \
            <= {(w["key"], w["offset"]) for w in lost}
    return results


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.name)
def test_the_grid_and_the_scenario_section_agree_with_the_checker(store, tmp_path):
    _agree(_copy(store, tmp_path))


@pytest.mark.parametrize("store", STORES, ids=lambda p: p.name)
def test_they_agree_on_an_injected_divergence(store, tmp_path):
    copy = _copy(store, tmp_path)
    key, offset = _inject_divergence(copy)
    results = _agree(copy)
    assert results["checkers"]["replica-diff"]["counts"]["divergence"] >= 1
    assert any((d["key"], d["offset"]) == (key, offset) and d["committed"]
               for d in results["checkers"]["replica-diff"]["differences"])


def test_the_suite_carries_stores_of_both_kinds():
    assert len(STORES) >= 2 and any((s / "scenario.json").is_file() for s in STORES)

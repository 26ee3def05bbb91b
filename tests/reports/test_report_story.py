"""The story of each lost write, read off the page by headless Chromium.

For the real `hw-data-loss` run in era hw (and any real store in REPORT_STORES
that lost writes, e.g. a random era-hw run): every acknowledged send missing
from the final reads has a story row that names the op that acknowledged it,
the leader and its epoch at the ack, the fault(s) before the loss and the
truncation that removed it.  The expected values come from the store itself
(history, broker logs), not from the report.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from reports_browser import extra_stores

import reports
import pytest

pytestmark = pytest.mark.browser

ROWS = """[...document.querySelectorAll('tr.story-row')].map(r => ({
  key: r.dataset.key, offset: r.dataset.offset, value: r.dataset.value, kind: r.className,
  ack: r.querySelector('.story-ack').innerText, leader: r.querySelector('.story-leader').innerText,
  faults: r.querySelector('.story-faults').innerText, removal: r.querySelector('.story-removal').innerText,
  diffRow: !!document.getElementById('diff-' + r.dataset.key + '-' + r.dataset.offset)}))"""


def _final_losses(store: Path) -> list[dict]:
    """Acknowledged sends absent from the final reads and from every replica's dump,
    straight from history.jsonl and nodes/*/dump.json."""
    ops = [json.loads(line) for line in (store / "history.jsonl").read_text().splitlines() if line.strip()]
    held = {(p["partition"], r[3]) for d in (store / "nodes").glob("*/dump.json")
            for p in json.loads(d.read_text())["partitions"] for r in p["records"]}
    final_at = next(o["index"] for o in ops if o["process"] == "nemesis" and o["f"] == "final")
    kept = {(int(k), v) for o in ops if o["index"] > final_at and o["f"] == "poll" and o["type"] == "ok"
            for k, pairs in o["value"].items() for _off, v in pairs}
    return [{"key": o["value"][0], "offset": o["value"][1][0], "value": o["value"][1][1], "op": o["index"]}
            for o in ops if o["f"] == "send" and o["type"] == "ok"
            and (o["value"][0], o["value"][1][1]) not in kept | held]


def _leaders(store: Path) -> set[tuple[str, int]]:
    """(node, epoch) of every 'leader in epoch E' line of the broker logs."""
    found = set()
    for log in (store / "nodes").glob("n*/broker.log"):
        for m in re.finditer(r"leader in epoch (\d+)", log.read_text()):
            found.add((log.parent.name, int(m.group(1))))
    return found


def _check_stories(browser, store: Path, shots: Path, name: str) -> int:
    report = Path(reports.build_report(store))
    lost = _final_losses(store)
    page = browser.load(report.as_uri())
    try:
        assert page.errors == [], page.errors
        rows = {(int(r["key"]), int(r["offset"]), r["value"]): r for r in browser.evaluate(page, ROWS)}
        leaders = _leaders(store)
        for w in lost:
            row = rows.get((w["key"], w["offset"], json.dumps(w["value"])))
            assert row is not None, f"{name}: no story row for {w}"
            assert "lost" in row["kind"].split()
            assert f"op {w['op']} " in row["ack"], row
            leader = re.fullmatch(r"(n\d+), epoch (\d+)", row["leader"].strip())
            assert leader and (leader.group(1), int(leader.group(2))) in leaders, row
            assert re.search(r"\b(kill|pause|partition)\b", row["faults"]), row
            assert re.search(r"n\d+ truncated its log from \d+ to \d+", row["removal"]), row
            assert row["diffRow"], row  # the log diff is unfolded at that offset
        browser.screenshot(page, shots / f"{name}-stories.png", selector="table.story-table")
        plot = f"#replica-{lost[0]['key']}" if lost else "img.replica-plot"  # the partition that lost writes
        browser.screenshot(page, shots / f"{name}-replica-plot.png", selector=plot)
    finally:
        browser.close_page(page)
    return len(lost)


RANDOM_HW_RUN = Path(__file__).resolve().parents[1] / "data" / "stores" / "hw-kill-seed11"


def test_every_lost_write_of_a_random_era_hw_run_has_its_story(browser, tmp_path, screenshot_dir):
    store = tmp_path / "hw-kill-seed11"
    shutil.copytree(RANDOM_HW_RUN, store)  # the report is written into the store
    assert _check_stories(browser, store, screenshot_dir, "random-hw-kill-seed11") == 22


def test_every_lost_write_of_hw_data_loss_has_its_story(browser, hw_data_loss_runs, screenshot_dir):
    out, store = hw_data_loss_runs["hw"]
    assert store is not None, out.stderr
    assert _check_stories(browser, store, screenshot_dir, "hw-data-loss-hw") >= 1
    sc = json.loads((store / "results.json").read_text())["scenario"]
    rows = _story_leaders(browser, store)
    b = sc["aliases"]["B"]  # the leader that acknowledged both writes, in the first epoch
    assert {rows[(w["key"], w["offset"])] for w in sc["unread_acknowledged"]} == {f"{b}, epoch 0"}
    page = browser.load((store / "report.html").as_uri())
    try:  # one time format: seconds since the start, never a wall-clock time in a table
        tables = browser.evaluate(page, "[...document.querySelectorAll('table.scenario-table, table.story-table, "
                                        "table.faults, table.ops-table')].map(t => t.innerText).join(' ')")
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", tables)
        assert "time 0 s = " in browser.evaluate(page, "document.getElementById('time-zero').innerText")
        bands = browser.evaluate(page, "[...document.querySelectorAll('.band-label')].map(b => b.innerText)")
        a, b_ = sc["aliases"]["A"], sc["aliases"]["B"]
        assert any(f"partition {' | '.join(sorted([a, b_]))}" in t for t in bands), bands  # who was cut off
    finally:
        browser.close_page(page)
    for extra in extra_stores():  # REPORT_STORES: e.g. a random era-hw run that lost writes
        path = Path(extra).resolve()
        _check_stories(browser, path, screenshot_dir, f"store-{path.parent.name}-{path.name}")


def _story_leaders(browser, store: Path) -> dict:
    page = browser.load((store / "report.html").as_uri())
    try:
        return {(int(r["key"]), int(r["offset"])): r["leader"] for r in browser.evaluate(page, ROWS)}
    finally:
        browser.close_page(page)

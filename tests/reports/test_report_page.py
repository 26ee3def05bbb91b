"""The run report's content, read back from the generated HTML (no browser needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from reports_html import Page
from reports_synthetic import make_store

import reports

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lossy_page(lossy_report) -> tuple[Page, str]:
    html = lossy_report.read_text()
    return Page(html), html


@pytest.fixture(scope="module")
def valid_page(valid_report) -> tuple[Page, str]:
    html = valid_report.read_text()
    return Page(html), html


def test_banner_says_what_went_wrong(lossy_page, lossy_store):
    page, _ = lossy_page
    results = json.loads((lossy_store / "results.json").read_text())
    banner = page.with_class("banner")
    assert banner and "invalid" in banner[0]["class"]
    lost = results["checkers"]["log"]["counts"]["lost-write"]
    sentence = re.search(r'<div id="verdict"[^>]*>(.*?)</div>', lossy_page[1]).group(1)
    assert sentence.startswith("Invalid:")
    assert f"{lost} acknowledged writes lost on partition 0" in sentence
    assert "replicas diverge" in sentence


def test_every_anomaly_type_has_a_section_with_linked_ops(lossy_page, lossy_store):
    page, html = lossy_page
    results = json.loads((lossy_store / "results.json").read_text())
    ids = page.ids()
    for checker, section in results["checkers"].items():
        for name, examples in section["examples"].items():
            assert f"anomaly-{checker}-{name}" in ids
            for ex in examples:
                for op in ex.get("ops", []):
                    assert f"op-{op}" in ids, f"op {op} of {name} has no row"
                    assert f'href="#op-{op}"' in html
    assert len(page.with_class("anomaly-table", "table")) == 3
    # the lost-write explanation is in plain words
    assert "the cluster confirmed the write, then lost it" in page.text


def test_referenced_ops_are_in_the_timeline(lossy_page, lossy_store):
    page, html = lossy_page
    results = json.loads((lossy_store / "results.json").read_text())
    boxes = page.with_class("op", "a")
    assert boxes and any("referenced" in b["class"] for b in boxes)
    first = results["checkers"]["log"]["examples"]["lost-write"][0]["ops"][0]
    assert f'id="t-{first}"' in html


def test_plots_and_grid_are_embedded(lossy_page, lossy_store):
    page, _ = lossy_page
    imgs = page.tags("img")
    assert imgs and all(i["src"].startswith("data:image/") for i in imgs)
    ids = page.ids()
    assert {"latency-plot", "throughput-plot", "overview-plot", "replica-0"} <= ids
    assert page.with_class("topology-plot")
    # the diff grid marks the divergent offsets the checker found and draws each HW
    results = json.loads((lossy_store / "results.json").read_text())
    divergent = {e["offset"] for e in results["checkers"]["replica-diff"]["examples"]["divergence"]}
    assert len(page.with_class("divergent", "td")) == 3 * len(divergent)
    assert len(page.with_class("hw", "td")) >= 3
    assert "diff-0" in ids


def test_page_is_self_contained(lossy_page):
    page, html = lossy_page
    for tag in ("script", "link", "iframe"):
        assert not page.tags(tag)
    assert not re.search(r'(src|href)="(https?:)?//', html)


def test_valid_run(valid_page):
    page, _ = valid_page
    banner = page.with_class("banner")[0]
    assert "valid" in banner["class"].split()
    assert "no anomaly" in page.text
    assert not page.with_class("anomaly-table")
    assert page.with_class("diff-grid") and not page.with_class("divergent", "td")
    assert "replica-0" in page.ids()


def test_script_in_a_record_value_is_text(tmp_path):
    evil = "<script>alert(1)</script>"
    store = make_store(tmp_path, n_ops=400, evil_value=evil)
    html = Path(reports.build_report(store)).read_text()
    assert evil not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    page = Page(html)
    assert not page.tags("script")
    assert evil in page.text  # shown to the reader as text


def test_missing_files_still_render(tmp_path):
    store = tmp_path / "t" / "20260101T000000"
    store.mkdir(parents=True)
    (store / "history.jsonl").write_text(
        '{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[0,1]}\n'
        "this is not json\n"
        '{"index":1,"time":5,"process":0,"type":"ok","f":"send","value":[0,[0,1]],"extra":{"x":1}}\n')
    page = Page(Path(reports.build_report(store)).read_text())
    assert "No verdict" in page.text
    assert "skipped 1 unreadable line(s), first at line 2" in page.text
    assert "op-0" in page.ids() and "op-1" in page.ids()

    empty = tmp_path / "empty"
    empty.mkdir()
    page = Page(Path(reports.build_report(empty)).read_text())
    assert "history.jsonl is missing or empty" in page.text


def test_script_anywhere_in_the_store_is_text(tmp_path):
    """Names, processes, fs, errors, config and dump values are all escaped too."""
    evil = '<img src=x onerror=alert(1)><script>alert(2)</script>"'
    store = make_store(tmp_path, n_ops=300, evil_value=evil)
    spec = json.loads((store / "test.json").read_text())
    spec["name"], spec["nemesis"] = evil, evil
    (store / "test.json").write_text(json.dumps(spec))
    with open(store / "history.jsonl", "a") as h:
        h.write(json.dumps({"index": 10**6, "time": 10**9, "process": evil, "type": "invoke", "f": evil,
                            "value": {evil: evil}}) + "\n")
        h.write(json.dumps({"index": 10**6 + 1, "time": 10**9 + 5, "process": evil, "type": evil,
                            "f": evil, "value": [evil], "error": evil}) + "\n")
    results = json.loads((store / "results.json").read_text())
    results["checkers"]["log"]["examples"]["lost-write"][0]["note"] = evil
    results["checkers"][evil] = {"valid": "unknown", "error": evil, "counts": {evil: 1},
                                 "examples": {evil: [{"key": evil, "ops": [10**6]}]}}
    (store / "results.json").write_text(json.dumps(results))
    dump_path = store / "nodes" / "n1" / "dump.json"
    dump = json.loads(dump_path.read_text())
    dump["partitions"][0]["records"][0][3] = evil
    dump_path.write_text(json.dumps(dump))

    html = Path(reports.build_report(store)).read_text()
    page = Page(html)
    assert "<script>" not in html and "<img src=x" not in html
    assert not page.tags("script")
    imgs = page.tags("img")
    assert imgs and all(i["src"].startswith("data:image/") for i in imgs)
    assert page.text.count(evil) >= 5


def test_scenario_run_states_its_expectation(tmp_path):
    store = make_store(tmp_path, n_ops=300)
    results = json.loads((store / "results.json").read_text())
    lost = results["checkers"]["log"]["examples"]["lost-write"][0]
    results["scenario"] = {
        "name": "hw-data-loss", "era": "hw", "source": "seed 1.4.1",
        "expected": {"valid": False, "anomalies": ["lost-write"]}, "as_expected": True,
        "forbidden_found": {"lost-write": 2}, "allowed_found": {}, "reasons": ["lost-write x2"],
        "unread_acknowledged": [{"key": 0, "offset": lost["offset"], "value": lost["value"],
                         "op": lost["ops"][1], "invoke": lost["ops"][0], "acks": "all"}],
        "truncation_check": {"expected": [{"node": "n2", "key": 0, "to": 3}],
                             "observed": [{"node": "n2", "key": 0, "to": 3}], "match": True},
        "leo_drops": [{"time_ns": 10**9, "node": "n2", "key": 0, "from": 5, "to": 3}],
        "steps": [{"index": 1, "action": "bind"}],
    }
    (store / "results.json").write_text(json.dumps(results))
    (store / "scenario.json").write_text(json.dumps({"scenario": {"description": "The follower truncates."}}))
    html = Path(reports.build_report(store)).read_text()
    page = Page(html)
    sentence = re.search(r'<div id="verdict"[^>]*>(.*?)</div>', html).group(1)
    assert sentence == ("Invalid: scenario hw-data-loss in variant hw: 2 acknowledged writes lost. "
                        "As expected (invalid with lost-write).")
    assert "scenario" in page.ids() and "The follower truncates." in page.text
    assert "match the expected ones" in page.text
    assert f'href="#op-{lost["ops"][1]}"' in html  # the lost write's op links to its row
    assert "Everything else the scenario recorded" in page.text

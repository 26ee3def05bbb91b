"""Reports rendered by a real headless Chromium: no JavaScript error, every part visible.

Runs on the synthetic stores and on any real store listed in REPORT_STORES
(os.pathsep separated store directories), e.g.
``REPORT_STORES=store/hw-data-loss/latest REPORT_SCREENSHOTS=/tmp/shots pytest tests/reports``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reports_browser import extra_stores
from reports_synthetic import make_store

import reports

pytestmark = pytest.mark.browser

PAGE_FACTS = """(() => {
  const imgs = [...document.querySelectorAll('img.plot')];
  return {
    verdict: (document.getElementById('verdict') || {}).innerText || '',
    verdictClass: (document.getElementById('verdict') || {}).className || '',
    anomalyTables: document.querySelectorAll('table.anomaly-table').length,
    anomalyRows: document.querySelectorAll('table.anomaly-table tr').length,
    plots: imgs.length,
    brokenPlots: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.id || i.alt),
    replicaPlots: document.querySelectorAll('img.replica-plot').length,
    diffGrids: document.querySelectorAll('table.diff-grid').length,
    divergentCells: document.querySelectorAll('table.diff-grid td.divergent').length,
    timelineBoxes: document.querySelectorAll('.timeline a.op').length,
    scripts: document.querySelectorAll('script').length,
  };
})()"""


def _reported_types(results: dict) -> int:
    """Anomaly types with examples in results.json: each gets one table on the page."""
    return sum(1 for section in (results.get("checkers") or {}).values() if isinstance(section, dict)
               for examples in (section.get("examples") or {}).values() if examples)


@pytest.fixture(scope="module")
def built(lossy_report, valid_report, hw_data_loss_runs):
    """(name, report, expected validity): the synthetic runs, the real
    hw-data-loss runs in eras hw (lost writes) and epoch (valid), then REPORT_STORES."""
    scenario = [(f"real-hw-data-loss-{era}", Path(reports.build_report(store)), valid)
                for era, valid in (("hw", False), ("epoch", True))
                for store in [hw_data_loss_runs[era][1]]]
    real = [(f"real-{i}", Path(reports.build_report(p)), None) for i, p in enumerate(extra_stores())]
    return [("hw-lossy", lossy_report, False), ("epoch-valid", valid_report, True)] + scenario + real


def test_reports_render_without_errors(browser, built, screenshot_dir):
    for name, report, expect_valid in built:
        page = browser.load(report.as_uri())
        try:
            assert page.errors == [], f"{name}: {page.errors}"
            facts = browser.evaluate(page, PAGE_FACTS)
            assert facts["verdict"], name
            assert facts["brokenPlots"] == [], name
            assert facts["plots"] >= 3 and facts["replicaPlots"] >= 1, (name, facts)
            assert facts["diffGrids"] >= 1, (name, facts)
            assert facts["timelineBoxes"] > 0, (name, facts)
            assert facts["scripts"] == 0
            results_path = report.parent / "results.json"
            results = json.loads(results_path.read_text()) if results_path.exists() else {}
            valid = results.get("valid")
            if expect_valid is not None:
                assert valid is expect_valid
            if valid is False:
                assert "invalid" in facts["verdictClass"].split(), (name, facts)
            if valid is True:
                assert "valid" in facts["verdictClass"].split(), (name, facts)
            assert facts["anomalyTables"] == _reported_types(results), (name, facts)
            browser.screenshot(page, screenshot_dir / f"{name}-full.png", max_height=4000)
            browser.screenshot(page, screenshot_dir / f"{name}-diff.png", selector="table.diff-grid")
            assert (screenshot_dir / f"{name}-full.png").stat().st_size > 10_000
        finally:
            browser.close_page(page)


def test_anomaly_link_jumps_to_the_op(browser, lossy_store, built):
    report = Path(lossy_store) / "report.html"
    page = browser.load(report.as_uri())
    try:
        moved = browser.evaluate(page, """(() => {
            const link = document.querySelector('table.anomaly-table a[href^="#op-"]');
            link.click();
            const row = document.querySelector(link.getAttribute('href'));
            return {hash: location.hash, target: row.matches(':target'), top: row.getBoundingClientRect().top};
        })()""")
        assert moved["hash"].startswith("#op-") and moved["target"]
        assert 0 <= moved["top"] < 1000  # scrolled into the viewport
    finally:
        browser.close_page(page)


def test_script_value_shows_as_text(browser, tmp_path):
    evil = "<script>alert(1)</script>"
    report = Path(reports.build_report(make_store(tmp_path, n_ops=300, evil_value=evil)))
    page = browser.load(report.as_uri())
    try:
        assert page.errors == []
        shown = browser.evaluate(page, f"document.body.innerText.includes({json.dumps(evil)})")
        assert shown is True
        assert browser.evaluate(page, "document.querySelectorAll('script').length") == 0
    finally:
        browser.close_page(page)


def test_index_sorts_and_filters(browser, store_root, built, screenshot_dir):
    index = Path(reports.build_index(store_root))
    page = browser.load(index.as_uri())
    try:
        assert page.errors == []
        rows = "[...document.querySelectorAll('#runs tbody tr')]"
        visible = f"{rows}.filter(r => r.style.display !== 'none').map(r => r.cells[1].innerText)"
        assert sorted(browser.evaluate(page, visible)) == ["epoch", "hw"]
        browser.evaluate(page, """(() => { const s = document.getElementById('verdict-filter');
            s.value = 'invalid'; s.dispatchEvent(new Event('change')); })()""")
        assert browser.evaluate(page, visible) == ["hw"]
        browser.evaluate(page, """(() => { const s = document.getElementById('verdict-filter');
            s.value = ''; s.dispatchEvent(new Event('change'));
            const t = document.getElementById('filter'); t.value = 'epoch';
            t.dispatchEvent(new Event('input')); })()""")
        assert browser.evaluate(page, visible) == ["epoch"]
        browser.evaluate(page, """(() => { const t = document.getElementById('filter'); t.value = '';
            t.dispatchEvent(new Event('input'));
            document.querySelectorAll('#runs th')[6].click(); })()""")  # anomalies, ascending
        order = browser.evaluate(page, f"{rows}.map(r => r.cells[6].innerText)")
        assert order == sorted(order, key=int)
        browser.evaluate(page, "document.querySelectorAll('#runs th')[6].click()")  # descending
        order = browser.evaluate(page, f"{rows}.map(r => r.cells[6].innerText)")
        assert order == sorted(order, key=int, reverse=True) and order[0] != order[-1]
        assert browser.evaluate(page, f"{rows}.every(r => r.querySelector('a[href$=\"report.html\"]'))")
        facts = browser.evaluate(page, f"{rows}.map(r => [r.cells[1].innerText, r.querySelector('td.duration').innerText, r.querySelector('td.rerun').innerText])")
        for era, duration, command in facts:
            assert float(duration) > 1, facts  # seconds to the last op of the history
            assert command.startswith(f"harness run --variant {era} --time-limit "), facts
        browser.screenshot(page, screenshot_dir / "index.png")
        assert browser.errors(page) == []
    finally:
        browser.close_page(page)


def test_the_error_capture_sees_errors(browser, tmp_path):
    """The no-error checks above could not pass by missing errors: a broken page is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('boom');"
                   "undefinedFunction();</script></body></html>")
    page = browser.load(bad.as_uri())
    try:
        assert any("boom" in e for e in page.errors), page.errors
        assert any("undefinedFunction" in e for e in page.errors), page.errors
    finally:
        browser.close_page(page)


FIRST_SCREEN = """(() => {
  const inView = el => !!el && el.getBoundingClientRect().bottom <= window.innerHeight;
  const visibleText = [...document.querySelectorAll('body *')]
    .filter(el => el.children.length === 0 && el.offsetParent !== null)
    .filter(el => el.getBoundingClientRect().top < window.innerHeight)
    .map(el => el.innerText).join('\\n');
  const rest = document.querySelector('details.config-rest');
  return {
    verdict: inView(document.getElementById('verdict')),
    parameters: inView(document.querySelector('table.run-parameters')),
    parameterNames: [...document.querySelectorAll('table.run-parameters tr td:first-child')].map(td => td.innerText),
    anomalies: document.querySelectorAll('table.anomaly-summary tr').length,
    anomaliesInView: inView(document.querySelector('table.anomaly-summary')),
    restFolded: !!rest && !rest.open,
    rest: rest ? rest.querySelector('pre').textContent : '',
    firstScreen: visibleText,
  };
})()"""


def test_first_screen_shows_verdict_anomalies_and_parameters(browser, built, screenshot_dir):
    """Issue 39, criterion 4: a report opens (1400 x 1000) on the verdict, the anomalies found and the
    run's parameters; test.json's other fields (the fault table with its colours, the final reads'
    internals) are one folded raw block, not on the first screen."""
    for name, report, _ in built:
        page = browser.load(report.as_uri(), width=1400, height=1000)
        try:
            facts = browser.evaluate(page, FIRST_SCREEN)
            browser.screenshot(page, screenshot_dir / f"{name}-first-screen.png", max_height=1000)
            assert facts["verdict"] and facts["parameters"], (name, facts)
            for row in ("system", "client", "backend", "nodes", "workload", "nemesis", "seed", "time limit",
                        "settings", "system options"):
                assert row in facts["parameterNames"], (name, row, facts["parameterNames"])
            results = json.loads((report.parent / "results.json").read_text())
            if results.get("valid") is False:
                assert facts["anomalies"] >= 1 and facts["anomaliesInView"], (name, facts)
            screen = facts["firstScreen"]
            assert "colour" not in screen and "faults." not in screen and "final_reads" not in screen, (name, screen)
            if name.startswith("real-"):  # a real run's test.json has the fault table: folded, below
                assert facts["restFolded"] and '"faults"' in facts["rest"] and "colour" in facts["rest"], (name, facts)
            assert (screenshot_dir / f"{name}-first-screen.png").stat().st_size > 10_000
        finally:
            browser.close_page(page)

"""`harness check-history`: a readable summary, the whole result with --json, and a
Porcupine-style page that headless Chromium renders without a console error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
KNOSSOS = REPO / "tests" / "data" / "knossos"
INVALID = KNOSSOS / "cas-register" / "bad" / "cas-failure.edn"
VALID = KNOSSOS / "cas-register" / "good" / "memstress3-0.edn"


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_check_history_json_is_the_whole_result(tmp_path):
    history = tmp_path / INVALID.name
    shutil.copy(INVALID, history)
    out = harness("check-history", str(history), "--model", "cas-register:0", "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    result = json.loads(out.stdout)  # one document, not cut in the middle
    assert result["valid"] is False and result["file"] == str(history)
    assert len(result["counterexample"]["linearized"]) > 20
    assert Path(result["page"]) == tmp_path / "cas-failure.linearizability.html"
    assert "page " in out.stderr  # human messages on stderr


def test_check_history_prints_a_readable_summary(tmp_path):
    out = harness("check-history", str(INVALID), "--model", "cas-register:0",
                  "--out", str(tmp_path / "page.html"), cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert out.stdout.startswith("NOT linearizable: model cas-register:0")
    assert "cannot be linearized" in out.stdout and "{" not in out.stdout.splitlines()[0]
    assert (tmp_path / "page.html").is_file()
    ok = harness("check-history", str(VALID), "--model", "cas-register:0", "--out", str(tmp_path / "v.html"),
                 cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("linearizable:"), ok.stdout + ok.stderr


def test_page_renders_the_counterexample(browser, tmp_path, screenshot_dir):
    page_path = tmp_path / "page.html"
    out = harness("check-history", str(INVALID), "--model", "cas-register:0", "--json",
                  "--out", str(page_path), cwd=tmp_path)
    result = json.loads(out.stdout)
    page = browser.load(page_path.as_uri())
    try:
        assert page.errors == [], page.errors
        facts = browser.evaluate(page, """(() => ({
            verdict: document.getElementById('verdict').innerText,
            panels: document.querySelectorAll('section.linear-panel').length,
            failing: [...document.querySelectorAll('g.call.failing title')].map(t => t.textContent),
            prefix: document.querySelectorAll('svg.linear-svg')[0].querySelectorAll('g.call.prefix').length,
            failingRow: document.querySelector('table.linear-table tr.failing').innerText,
        }))()""")
        assert facts["verdict"].startswith("NOT linearizable") and facts["panels"] == 1
        op = result["counterexample"]["op"]
        assert facts["failing"] and all(f"..{op['index']};" in t for t in facts["failing"]), facts
        assert facts["prefix"] == len(result["counterexample"]["linearized"])
        assert str(op["process"]) in facts["failingRow"]
        browser.screenshot(page, screenshot_dir / "check-history-page.png")
        assert browser.errors(page) == []
    finally:
        browser.close_page(page)


def test_a_keyed_panel_draws_only_its_key():
    """A log history of 3 keys: the panel of the key that fails holds that key's calls only."""
    from history.formats import read_history
    from checkers.linear import check_ops

    from reports.linear_page import panels

    ops = read_history(str(REPO / "tests" / "data" / "stores" / "hw-kill-seed11" / "history.jsonl"))
    result = check_ops(ops, "log")
    assert result["valid"] is False and result["keys"] == 3
    (p,) = panels(ops, result)
    key = result["counterexample"]["key"]
    sends = [b.title for b in p.views[0].bars if ": send " in b.title]
    assert sends and all(f"send [{key}, " in t for t in sends), sends[:5]
    assert sum(b.css == "failing" for b in p.views[0].bars) == 1


def test_the_run_report_shows_the_counterexample_view(tmp_path):
    """results.json with a linearizability counterexample: the run report draws its panel."""
    from history.formats import read_history
    from checkers.linear import check_ops
    from reports_html import Page

    import reports

    store = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "stores" / "hw-kill-seed11", store)
    result = check_ops(read_history(str(store / "history.jsonl")), "log")
    results = json.loads((store / "results.json").read_text())
    results["checkers"]["linearizability"] = result
    (store / "results.json").write_text(json.dumps(results))
    page = Page(Path(reports.build_report(store)).read_text())
    assert "linearizability" in page.ids()
    from reports.linear_page import counterexamples

    assert len(page.with_class("linear-panel", "section")) == len(counterexamples(result)) >= 1
    assert len(page.with_class("failing", "g")) >= 1

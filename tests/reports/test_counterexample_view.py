"""The report of a real `hw-data-loss` run in era hw shows the linearizability
counterexample view, from the checker every run now runs: headless Chromium
renders it without a console error, and a screenshot of the panel is kept."""
from __future__ import annotations

import json
from pathlib import Path

import reports
import pytest

pytestmark = pytest.mark.browser


def test_hw_data_loss_report_shows_the_counterexample_view(browser, hw_data_loss_runs, screenshot_dir):
    out, store = hw_data_loss_runs["hw"]
    assert store is not None, out.stdout + out.stderr
    results = json.loads((store / "results.json").read_text())
    linear = results["checkers"]["linearizability"]
    assert linear["valid"] is False and linear["counterexamples"], linear
    example = linear["counterexamples"][0]
    assert example["linearized"] and example["op"]["index"] is not None
    assert example["op"]["complete_time"] is not None or example["op"]["invoke_time"] is not None
    report = Path(reports.build_report(store))
    page = browser.load(report.as_uri())
    try:
        assert page.errors == []
        panels = browser.evaluate(page, "document.querySelectorAll('section.linear-panel').length")
        failing = browser.evaluate(page, "document.querySelectorAll('g.failing').length")
        assert panels == len(linear["counterexamples"]) and failing >= 1
        browser.screenshot(page, screenshot_dir / "hw-data-loss-counterexample.png",
                           selector="section.linear-panel")
        assert (screenshot_dir / "hw-data-loss-counterexample.png").stat().st_size > 5_000
    finally:
        browser.close_page(page)

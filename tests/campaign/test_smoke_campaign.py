"""campaigns/smoke.yaml end to end on the netns backend: exit 0 (and its `--json`), its page in
a headless Chromium (no console error, every run's report linked), the JUnit
XML of every run, scenario and the campaign valid against the schema, and
`harness serve` on the store root."""
from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from campaign_util import REPO, campaign_argv, campaign_env, campaign_folders, junit_schema, need_root

# a real campaign: a minute or more on a loaded 2-core machine (the fixture runs inside the first test)
pytestmark = pytest.mark.timeout(1200)  # tiers: on each test (root, one browser)


from harness.serve import make_server

LINKS = """(() => [...document.querySelectorAll('#matrix a.run')].map(a => ({
  href: a.getAttribute('href'), text: a.textContent, ok: a.href.startsWith('file:')})))()"""


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    need_root()
    tmp = tmp_path_factory.mktemp("smoke")
    out = subprocess.run(campaign_argv(REPO / "campaigns" / "smoke.yaml", tmp / "store", "--junit",
                                       str(tmp / "smoke.xml"), "--subnets", "10.226.0.0/23",
                                       "--parallel", "3", "--json"),
                         capture_output=True, text=True, env=campaign_env(tmp), cwd=tmp, timeout=1100)
    folders = campaign_folders(tmp / "store", "smoke")
    return out, folders[-1], tmp


@pytest.mark.root
def test_smoke_exits_0(smoke):
    out, folder, _tmp = smoke
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["exit_code"] == 0 and summary["totals"]["as_expected"] == summary["totals"]["cells"]
    # --json: stdout is one document (summary.json with the store and the exit code), the
    # progress lines went to stderr
    doc = json.loads(out.stdout)
    assert Path(doc["store"]) == folder and doc["store"].startswith(str(_tmp / "store" / "campaigns"))
    assert doc["exit_code"] == 0 and doc["valid"] is True and doc["cells"] == summary["cells"]
    assert "cells as expected" in out.stderr
    # the known bug is found: the hw-data-loss scenario loses writes in era hw
    hw = next(c for c in summary["cells"] if c["id"] == "scenario-hw-data-loss-hw")
    assert hw["runs"][0]["verdict"] == "invalid" and "lost-write" in hw["runs"][0]["anomalies"]
    assert hw["ttfa_median_s"] is not None and hw["ttfa_median_s"] > 0
    assert [e["event"] for e in _events(folder)][-2:] == ["checked", "finished"]
    # the final check of six small runs is in-process (`--engine auto`); Spark checks a campaign
    # in tests/checkers/test_spark_cluster.py (standalone) and test_store_spark.py (local[2])
    assert _events(folder)[-2]["engine"] == "local" and "in-process (auto:" in out.stdout + out.stderr


def _events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines()]


@pytest.mark.browser
def test_page_renders_and_links_every_run(smoke, browser):
    _out, folder, tmp = smoke
    page = browser.load((folder / "index.html").as_uri())
    assert browser.errors(page) == []
    links = browser.evaluate(page, LINKS)
    plan = json.loads((folder / "plan.json").read_text())
    planned = [r["tag"] for c in plan["cells"] for r in c["runs"]]
    assert len(links) == len(planned) == 6
    for link in links:
        report = folder / link["href"]
        assert report.name == "report.html" and report.is_file(), link
    report_page = browser.load((folder / links[0]["href"]).as_uri())
    assert browser.errors(report_page) == []
    root_page = browser.load((tmp / "store" / "campaigns" / "index.html").as_uri())
    assert browser.errors(root_page) == []
    facts = browser.evaluate(root_page, """(() => ({rows: document.querySelectorAll('#campaigns tbody tr').length,
        plot: (document.getElementById('pass-rate') || {}).naturalWidth || 0}))()""")
    assert facts["rows"] == 1 and facts["plot"] > 0


@pytest.mark.root
def test_junit_of_runs_scenarios_and_campaign_validate(smoke):
    _out, folder, tmp = smoke
    schema = junit_schema()
    run_files = sorted(folder.glob("runs/*/*/attempt-*/junit.xml"))
    assert len(run_files) == 6  # `--junit` of each `harness run` and `harness scenario`
    for path in [tmp / "smoke.xml", folder / "junit.xml", *run_files]:
        schema.validate(str(path))
    scenario = ET.parse(folder / "runs" / "scenario-hw-data-loss-hw" / "run-1" / "attempt-1" / "junit.xml")
    case = scenario.find(".//testcase")
    assert case.get("classname") == "hw-data-loss/hw"
    failure = case.find("failure")  # `harness scenario --junit`: invalid is a failure
    assert failure is not None and "report" in failure.get("message") and "lost-write" in failure.get("message")
    campaign = ET.parse(tmp / "smoke.xml").getroot()
    assert campaign.get("tests") == "6" and campaign.get("failures") == "0" and campaign.get("errors") == "0"
    props = {p.get("name"): p.get("value") for p in campaign.find("testsuite").iter("property")}
    assert props["seed"] == "1" and Path(props["store"]).is_dir()


@pytest.mark.root
def test_serve_the_store_root(smoke):
    _out, folder, tmp = smoke
    server = make_server(tmp / "store", 0)
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        rel = folder.relative_to(tmp / "store")
        with urllib.request.urlopen(f"http://{host}:{port}/{rel}/index.html", timeout=30) as r:
            assert r.status == 200 and b"Campaign smoke" in r.read()
        with urllib.request.urlopen(f"http://{host}:{port}/campaigns/index.html", timeout=30) as r:
            assert r.status == 200
    finally:
        server.shutdown()
        server.server_close()

"""A campaign SIGKILLed in the middle of a run and resumed runs every run
exactly once to completion, keeps the cut-off attempt marked; a second
campaign of the same file whose expectation no longer holds shows that cell
as a new failure on its page and in its JUnit XML."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from campaign_util import campaign_argv, campaign_env, campaign_folders, events, junit_schema, need_root

# real campaigns: minutes on a loaded 2-core machine (the fixture runs inside the first test)
pytestmark = [pytest.mark.root, pytest.mark.timeout(1200)]


FILE = """name: resume-t
eras: [epoch]
nemesis: [[kill]]
seeds: [1, 2]
time_limit: 4
nemesis_interval: 1
options: {{concurrency: 4, rate: 50}}
expect:
  - where: {{era: epoch}}
    verdict: {verdict}
"""


def _pid_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    need_root()
    tmp = tmp_path_factory.mktemp("resume")
    file, store = tmp / "resume-t.yaml", tmp / "store"
    file.write_text(FILE.format(verdict="valid"))
    env = campaign_env(tmp)
    argv = campaign_argv(file, store, "--subnets", "10.226.4.0/24", "--engine", "local")  # Spark: tests/checkers/test_spark_cluster.py
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    deadline = time.monotonic() + 120
    child = None
    while time.monotonic() < deadline and child is None:  # kill mid-way through the first run
        time.sleep(0.3)
        try:
            folder = campaign_folders(store, "resume-t")[-1]
        except (FileNotFoundError, IndexError):
            continue
        starts = [e for e in events(folder) if e["event"] == "run-start"]
        if starts and list(folder.glob("runs/*/*/attempt-1/*/*/history.jsonl")):
            child = starts[0]["pid"]
    assert child is not None, "the first run never started"
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    second = subprocess.run(argv + ["--resume"], capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    return first, second, folder, child, tmp, env


def test_every_run_completes_exactly_once(resumed):
    _first, second, folder, child, _tmp, _env = resumed
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert _pid_gone(child)  # the run of the killed campaign went with it
    plan = json.loads((folder / "plan.json").read_text())
    planned = [r["id"] for c in plan["cells"] for r in c["runs"]]
    evs = events(folder)
    ends = [e for e in evs if e["event"] == "run-end"]
    assert sorted(e["run"] for e in ends) == sorted(planned) and all(e["complete"] for e in ends)
    partial = [e for e in evs if e["event"] == "run-partial"]
    assert [e["run"] for e in partial] == [planned[0]]
    cut = folder / "runs" / planned[0] / "attempt-1"
    assert (cut / "PARTIAL.json").is_file() and list(cut.glob("*/*/history.jsonl"))  # kept, marked
    assert not list(cut.glob("*/*/results.json"))
    assert (folder / "runs" / planned[0] / "attempt-2").is_dir()
    assert [e["event"] for e in evs].count("resume") == 1 and evs[-1]["event"] == "finished"
    summary = json.loads((folder / "summary.json").read_text())
    assert [r["attempts"] for c in summary["cells"] for r in c["runs"]] == [2, 1]
    assert summary["cells"][0]["status"] == "as-expected"


def test_a_new_failure_shows_on_the_page_and_in_junit(resumed):
    _first, _second, folder, _child, tmp, env = resumed
    file, store = tmp / "resume-t.yaml", tmp / "store"
    file.write_text(FILE.format(verdict="invalid"))  # the same cell now expects what it no longer shows
    out = subprocess.run(campaign_argv(file, store, "--runs-per-cell", "1", "--subnets", "10.226.4.0/24",
                                       "--junit", str(tmp / "j.xml"), "--engine", "local"),
                         capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    latest = campaign_folders(store, "resume-t")[-1]
    assert latest != folder
    summary = json.loads((latest / "summary.json").read_text())
    assert summary["comparison"]["previous"] == folder.name
    assert summary["comparison"]["new_failures"] == ["replica-epoch-kill"]
    html = (latest / "index.html").read_text()
    assert 'data-comparison="new-failure"' in html and 'id="new-failures">New failures (1)' in html
    junit_schema().validate(str(tmp / "j.xml"))
    failure = ET.parse(tmp / "j.xml").getroot().find(".//testcase/failure")
    assert failure is not None and failure.get("message").startswith(f"NEW FAILURE (as expected in campaign {folder.name})")
    index = (store / "campaigns" / "index.html").read_text()
    assert index.count('href="resume-t/') == 2
    assert os.path.isfile(latest / "junit.xml")

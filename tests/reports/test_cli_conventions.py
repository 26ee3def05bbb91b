"""CLI conventions: --version, one-line usage errors naming the flag, --log-level,
`harness index`, `harness export --format edn` read back by edn-format op by op,
and --json documents (verdict + store path) for machines."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import edn_format
import pytest
from reports_synthetic import make_store

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]


def harness(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(REPO), CI="true", **(env or {}))
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd, env=full, timeout=timeout)


def one_line_error(out: subprocess.CompletedProcess, *words: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_version(tmp_path):
    out = harness("--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("harness "), out


@pytest.mark.parametrize("args,words", [
    (["scenario", "hw-data-loss", "--backend", "dockr"], ["--backend", "dockr", "netns"]),
    (["run", "--nodes", "abc"], ["--nodes", "abc", "int"]),  # typer: "not a valid int(eger)"
    (["run", "--backend", "dockr"], ["--backend", "dockr"]),
    (["check", "x", "--engine", "sprak"], ["--engine", "sprak", "spark"]),
    (["--log-level", "loud", "cleanup"], ["--log-level", "loud", "debug"]),
    (["run", "--no-such-flag"], ["--no-such-flag"]),
    (["check-history", "h.edn", "--model", "cas"], ["--model", "cas-register"]),
])
def test_usage_errors_are_one_line_naming_the_flag(tmp_path, args, words):
    line = one_line_error(harness(*args, cwd=tmp_path), *words)
    assert "validation error" not in line and "\u256d" not in line  # no pydantic dump, no box
    assert not (tmp_path / "store").exists()


def test_log_level_from_the_environment(tmp_path):
    one_line_error(harness("cleanup", "--run", "nope", cwd=tmp_path, env={"HARNESS_LOG_LEVEL": "chatty"}),
                   "HARNESS_LOG_LEVEL", "chatty")
    out = harness("report", str(tmp_path / "missing"), cwd=tmp_path, env={"HARNESS_LOG_LEVEL": "debug"})
    assert out.returncode == 2  # accepted; the command itself then refuses the path


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return make_store(tmp_path_factory.mktemp("cli"), n_ops=400, seconds=4.0)


def test_export_edn_reads_back_op_by_op(small_store, tmp_path):
    out = harness("export", str(small_store), "--format", "edn", "--out", str(tmp_path / "h.edn"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "h.edn")
    ours = [json.loads(line) for line in (small_store / "history.jsonl").read_text().splitlines()]
    theirs = edn_format.loads((tmp_path / "h.edn").read_text())
    assert len(theirs) == len(ours) > 100

    def plain(v):
        if isinstance(v, edn_format.Keyword):
            return v.name
        if hasattr(v, "items"):  # edn_format's ImmutableDict
            return {str(plain(k)): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)) or type(v).__name__ == "ImmutableList":
            return [plain(x) for x in v]
        return v

    for mine, edn_op in zip(ours, theirs):
        assert plain(edn_op) == mine
    default = harness("export", str(small_store), cwd=tmp_path)
    assert default.returncode == 0 and (small_store / "history.edn").is_file()
    one_line_error(harness("export", str(tmp_path / "nope"), cwd=tmp_path), "nope")


def test_index_subcommand(small_store, tmp_path):
    root = small_store.parents[1]
    out = harness("index", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == root / "index.html"
    one_line_error(harness("index", str(tmp_path / "nope"), cwd=tmp_path), "nope")


def test_check_json(small_store, tmp_path):
    out = harness("check", str(small_store), "--json", cwd=tmp_path)
    doc = json.loads(out.stdout)
    assert doc["store"] == str(small_store.resolve()) and doc["valid"] in (True, False, "unknown")
    assert out.returncode == doc["exit_code"] == {True: 0, False: 1}.get(doc["valid"], 2)
    assert out.stderr.strip()  # the human summary went to stderr


# `harness run --json`: tests/harness/test_run_e2e.py; `harness scenario --json`:
# tests/scenarios/test_scenario_e2e.py (their runs print the document).


def test_campaign_counts_a_scenario_run_invalid_as_expected_as_a_pass(hw_data_loss_runs, tmp_path):
    """hw-data-loss in era hw loses writes, as its scenario expects: the campaign passes (it exited 1)."""
    _, store = hw_data_loss_runs["hw"]
    root = tmp_path / "root"
    shutil.copytree(store, root / "hw-data-loss-hw" / store.name, symlinks=True)
    out = harness("campaign", "check", str(root), "--engine", "local", "--json", cwd=tmp_path, timeout=300)
    doc = json.loads(out.stdout)
    run = doc["runs"][str(root / "hw-data-loss-hw" / store.name)]
    assert run["valid"] is False and run["as_expected"] is True, doc  # invalid, as expected
    assert out.returncode == doc["exit_code"] == 0 and doc["store"] == str(root), out.stderr
    assert "as expected" in out.stderr  # the human lines, on stderr under --json


def _start_run(tmp_path: Path, subnet: str, time_limit: str) -> tuple[subprocess.Popen, Path]:
    store = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp_path / "runs"),
               HARNESS_WORK_ROOT=str(tmp_path / "work"))
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--time-limit", time_limit, "--nodes", "1",
                             "--keys", "1", "--concurrency", "3", "--store", str(store), "--subnet", subnet],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    return proc, store


def _stop(proc: subprocess.Popen, tmp_path: Path) -> None:
    """A run the test gave up on is SIGKILLed, then `harness cleanup` removes
    what it left (its namespaces and processes), as a user would."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)
        env = dict(os.environ, PYTHONPATH=str(REPO), HARNESS_RUN_DIR=str(tmp_path / "runs"))
        subprocess.run([sys.executable, "-m", "harness", "cleanup"], cwd=tmp_path, env=env,
                       capture_output=True, timeout=120)


def _wait_for_ops(store: Path, proc: subprocess.Popen, n: int = 20) -> Path:
    """The run's history once the workload has written ``n`` lines."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        found = [h for h in store.glob("*/*/history.jsonl") if not h.parent.is_symlink()]
        if found and len(found[0].read_text().splitlines()) >= n:
            return found[0]
        time.sleep(0.2)
    raise AssertionError("the run wrote no history")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
@pytest.mark.parametrize("ops_before", [20, 200])
def test_ctrl_c_leaves_no_coroutine_unawaited(tmp_path, ops_before):
    proc, store = _start_run(tmp_path, "10.223.6.0/24", "60")
    try:
        _wait_for_ops(store, proc, ops_before)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=90)
    finally:
        _stop(proc, tmp_path)
    assert proc.returncode == 2, err
    assert "interrupted by SIGINT" in err
    assert "never awaited" not in err and "Task was destroyed" not in err, err


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_latest_points_at_a_run_only_once_its_store_is_complete(tmp_path):
    proc, store = _start_run(tmp_path, "10.223.7.0/24", "4")
    try:
        history = _wait_for_ops(store, proc)
        run_dir = history.parent
        for link in (store / "latest", run_dir.parent / "latest"):
            assert not link.exists() or link.resolve() != run_dir.resolve(), "latest points at a running run"
        _out, err = proc.communicate(timeout=150)
    finally:
        _stop(proc, tmp_path)
    assert proc.returncode in (0, 1), err
    assert (store / "latest").resolve() == run_dir.resolve() == (run_dir.parent / "latest").resolve()
    assert (store / "latest" / "results.json").is_file()
    test = json.loads((run_dir / "test.json").read_text())
    first = json.loads(history.read_text().splitlines()[0])
    assert isinstance(test.get("t0_wall"), float)  # the wall clock at history time 0, for the report's one axis
    assert abs(test["t0_wall"] + first["time"] / 1e9 - run_dir.stat().st_mtime) < 600


# `harness campaign run --json`: tests/campaign/test_smoke_campaign.py (the smoke campaign runs with it)

"""`harness run --sut nats` and `harness scenario` on NATS, end to end, as a
user runs them (a subprocess, a real cluster on netns): a verdict that is
valid or invalid (never unknown because NATS has no dumps), the leaders in
the samples, the scenario library's declared verdicts, the refusals."""
import json
import os
import subprocess
from pathlib import Path

from tests.harness.hrun_util import run_harness
from tests.nats.natsutil import need_root
import pytest

pytestmark = pytest.mark.root


def _store(out: subprocess.CompletedProcess) -> Path:
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr[-2000:]
    return Path(lines[-1])


def test_run_ends_with_a_verdict_and_leaders_in_the_samples(tmp_path):
    need_root()
    out = run_harness(tmp_path, "run", "--sut", "nats", "--nemesis", "kill", "--nemesis-interval", "4",
                      "--time-limit", "8", "--seed", "4", "--subnet", "10.221.5.0/24", "--store", tmp_path / "s")
    store = _store(out)
    results = json.loads((store / "results.json").read_text())
    assert out.returncode in (0, 1), out.stderr[-2000:]
    assert results["valid"] in (True, False)
    diff = results["checkers"]["replica-diff"]
    assert diff["valid"] in (True, False) and "applies" not in diff   # the stopped stores, read back
    for node in ("n1", "n2", "n3"):
        dump = json.loads((store / "nodes" / node / "dump.json").read_text())
        assert {p["partition"] for p in dump["partitions"]} == {0, 1, 2}
    leaders = {p["leader"] for line in (store / "samples.jsonl").read_text().splitlines()
               for p in json.loads(line)["state"]["partitions"]}
    assert leaders & {"n1", "n2", "n3"}
    assert (store / "nodes" / "n1" / "nats.log").is_file() and (store / "report.html").is_file()
    assert not list((tmp_path / "runs").glob("*.json")), "run record left behind"


def test_memory_streams_have_no_replica_to_diff(tmp_path):
    """Nothing of a memory stream outlives its server: the diff says so and does
    not make the verdict unknown; file streams are diffed."""
    from checkers.check_store import not_applicable

    for storage in ("memory", "file"):
        (tmp_path / storage).mkdir()
        (tmp_path / storage / "test.json").write_text(json.dumps({"system": "nats",
                                                                   "system_options": {"storage": storage}}))
    assert "memory storage keeps no copy" in not_applicable(str(tmp_path / "memory"))["replica-diff"]
    assert not_applicable(str(tmp_path / "file")) == {}


def test_kill_all_replicas_scenario_has_its_declared_verdict(tmp_path):
    """file: valid (the memory variant's loss is test_loss.py's, on one replica)."""
    need_root()
    out = run_harness(tmp_path, "scenario", "nats-kill-all-replicas", "--variant", "file", "--expect",
                      "--subnet", "10.221.6.0/24", "--store", tmp_path / "s")
    assert out.returncode == 0, out.stderr[-2000:]


def test_conditions_on_the_replicas_internals_are_refused_before_any_host(tmp_path):
    script = tmp_path / "leo.yaml"
    script.write_text("name: leo\nsystem: nats\nnodes: 3\nkeys: 1\nexpect: {file: valid}\n"
                      "steps:\n  - write: 3\n  - wait: leo of n1 on key 0 >= 3\n")
    out = run_harness(tmp_path, "scenario", "--file", script, "--variant", "file", timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "'nats' does not support 'offsets'" in lines[0] and "step 2" in lines[0]


def test_missing_nats_server_is_one_line_naming_host_and_fix(tmp_path):
    need_root()
    spec = tmp_path / "spec.yaml"
    spec.write_text("system: nats\nsystem_options: {server_binary: nats-server-not-installed}\n")
    out = run_harness(tmp_path, "run", "--spec", spec, "--time-limit", "5", "--subnet", "10.221.7.0/24",
                      "--store", tmp_path / "s", timeout=120)
    assert out.returncode == 2
    errors = [l for l in out.stderr.splitlines() if "nats-server-not-installed" in l]
    assert errors and "host n1" in errors[-1] and "apt-get install nats-server" in errors[-1], out.stderr
    assert not list((tmp_path / "runs").glob("*.json"))
    run_id = json.loads(next((tmp_path / "s").glob("*/*/test.json")).read_text())["run_id"]
    assert f"hx-{run_id}-" not in subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
    assert run_id not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout

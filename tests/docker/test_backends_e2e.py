"""Whole harness runs (the CLI, as a user runs it) on the docker backend and
on the ssh backend, with faults; the newest protocol generation must come out
valid and nothing of the run may be left behind."""
from __future__ import annotations

import json
import subprocess
import sys

import yaml

from checkers import log_anomalies, replica_diff
from history.formats import read_history
from harness.cluster.docker import LABEL_RUN, docker_client

from dockertest_util import REPO
import pytest

pytestmark = pytest.mark.docker

FAULT_ARGS = ["--era", "epoch", "--nemesis", "kill,pause,partition", "--nemesis-interval", "3",
              "--time-limit", "10", "--rate", "50"]


def _harness(args: list[str]) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "harness", "run", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    assert "run aborted" not in out, out[-3000:]
    return proc.returncode, out


def _store(store_root):
    return sorted(p for p in store_root.glob("*/2*") if p.is_dir())[-1]


def _assert_valid_store(store_root, rc: int, out: str) -> None:
    store = _store(store_root)
    assert rc == 0, out[-3000:]
    assert json.loads((store / "results.json").read_text())["valid"] is True
    ops = read_history(store / "history.jsonl")
    assert sum(1 for op in ops if op["type"] == "ok" and op["f"] == "send") > 50
    nemesis = {op["f"] for op in ops if op["process"] == "nemesis"}
    assert "final" in nemesis and nemesis & {"kill", "pause", "partition"}, nemesis
    assert log_anomalies.check(ops)["valid"] is True
    dumps = {n: json.loads((store / "nodes" / n / "dump.json").read_text()) for n in ("n1", "n2", "n3")}
    assert all(d["partitions"] for d in dumps.values())
    assert replica_diff.check(dumps, ops)["valid"] is True
    assert (store / "nodes" / "n1" / "broker.log").stat().st_size > 0


def test_docker_backend_run_with_faults(docker_ready, tmp_path):
    rc, out = _harness(["--backend", "docker", "--seed", "11", "--store", str(tmp_path), *FAULT_ARGS])
    _assert_valid_store(tmp_path, rc, out)
    # This run's own containers and network are gone (filtered by its run id: another
    # suite on the same engine may have runs of its own up at this moment).
    run_id = json.loads((_store(tmp_path) / "test.json").read_text())["run_id"]
    client = docker_client()
    label = f"{LABEL_RUN}={run_id}"
    assert client.containers.list(all=True, filters={"label": label}) == []
    assert client.networks.list(filters={"label": label}) == []


def test_ssh_backend_run_against_hosts_known_only_by_address(cluster, tmp_path):
    key, known = cluster.write_ssh_files(str(tmp_path / "ssh"))
    spec = {"backend": "ssh", "nodes": 3,
            "backend_options": {"hosts": [cluster.addresses[h] for h in ("ctl", "n1", "n2", "n3")],
                                "ssh_user": "root", "ssh_key": key, "known_hosts": known}}
    spec_file = tmp_path / "ssh.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    rc, out = _harness(["--spec", str(spec_file), "--seed", "5", "--store", str(tmp_path / "store"),
                        *FAULT_ARGS])
    _assert_valid_store(tmp_path / "store", rc, out)
    for r in cluster.remotes.values():  # nothing of the run left on the hosts
        assert r.run(["sh", "-c", "ls -d /tmp/harness-* 2>/dev/null; pgrep -f '^python3 -m replica'"],
                     check=False).stdout == ""


SCENARIO = """
import json, sys
from harness.runner import Run
from scenarios.script import load_scenario
from scenarios.program import ScenarioProgram, scenario_spec
scenario = load_scenario("hw-data-loss")
spec = scenario_spec(scenario, "hw", backend="ssh", store_root=sys.argv[1])
spec.backend_options = json.loads(sys.argv[2])
hosts = spec.backend_options["hosts"][:scenario.nodes + 1]
spec.backend_options["hosts"] = hosts
run = Run(spec, ScenarioProgram(scenario, "hw"))
run.execute()
print(json.dumps({"store": str(run.store), "step_error": run.step_error,
                  "scenario": (run.results or {}).get("scenario")}))
"""


def _steps(store: str) -> str:
    """The run's log of steps and faults with their times, for a failure's message."""
    try:
        with open(f"{store}/harness.log") as log:
            return "".join(line for line in log if " step " in line or " nemesis " in line)
    except OSError as e:
        return str(e)


def test_scenario_over_the_ssh_backend_finds_the_hw_data_loss(cluster, tmp_path):
    """The library's hw-data-loss scenario on hosts known only by address,
    user, key and known_hosts: the hw generation loses the write, as on netns."""
    key, known = cluster.write_ssh_files(str(tmp_path / "ssh"))
    opts = {"hosts": [cluster.addresses[h] for h in ("ctl", "n1", "n2", "n3")],
            "ssh_user": "root", "ssh_key": key, "known_hosts": known}
    proc = subprocess.run([sys.executable, "-c", SCENARIO, str(tmp_path / "store"), json.dumps(opts)],
                          cwd=REPO, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["step_error"] is None
    assert out["scenario"]["as_expected"] is True, (json.dumps(out["scenario"]), _steps(out["store"]))


def test_docker_backend_runs_kafka(docker_ready, tmp_path):
    """Kafka's brokers in containers: the node image's Java runs this machine's
    jars (uploaded once per container), every broker's dump is read in its
    container, and the run is valid."""
    rc, out = _harness(["--sut", "kafka", "--backend", "docker", "--seed", "12", "--store", str(tmp_path),
                        "--nemesis", "kill,partition", "--nemesis-interval", "3", "--time-limit", "12",
                        "--rate", "50"])
    store = _store(tmp_path)
    assert rc == 0, out[-3000:]
    results = json.loads((store / "results.json").read_text())
    assert results["valid"] is True and results["checkers"]["replica-diff"]["valid"] is True
    for n in ("n1", "n2", "n3"):
        dump = json.loads((store / "nodes" / n / "dump.json").read_text())
        assert {p["partition"] for p in dump["partitions"]} == {0, 1, 2}
        assert (store / "nodes" / n / "kafka.log").stat().st_size > 0
    run_id = json.loads((store / "test.json").read_text())["run_id"]
    assert docker_client().containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}) == []

"""Scenarios on a real netns cluster, through `harness scenario`.

hw-data-loss must lose the two acknowledged writes in era hw (the follower
truncated to its checkpointed HW, then was elected) and lose nothing in era
epoch; a script whose `wait` never comes true must stop with one line that
names the step, what it waited for and the last value seen, exit 2, and
leave nothing behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("replica.client")
pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
              pytest.mark.timeout(240)]


def harness(tmp: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp / "runs"),
               HARNESS_WORK_ROOT=str(tmp / "work"))
    return subprocess.run([sys.executable, "-m", "harness", "scenario", *map(str, args)], capture_output=True,
                          text=True, cwd=tmp, env=env, timeout=200)


def leftovers(run_id: str) -> list[str]:
    out = [l for l in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
           if run_id in l]
    out += [l for l in subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.splitlines()
            if run_id in l]
    out += [l for l in subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
            if f"hx-{run_id}" in l and "ps -eo" not in l]
    return out


def run_dir(out: subprocess.CompletedProcess) -> Path:
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("era,code", [("hw", 1), ("epoch", 0)])
def test_hw_data_loss(hw_data_loss_runs, era, code):
    out, store = hw_data_loss_runs[era]
    assert out.returncode == code, out.stderr[-3000:]
    doc = json.loads(out.stdout)   # `--json`: results.json with the store, one document
    assert doc["store"] == str(store) and doc["exit_code"] == code and doc["scenario"]["name"] == "hw-data-loss"
    for name in ("test.json", "history.jsonl", "samples.jsonl", "results.json", "scenario.json"):
        assert (store / name).is_file(), name
    assert (store / "nodes" / "n1" / "dump.json").is_file() and (store / "nodes" / "n2" / "broker.log").is_file()
    res = json.loads((store / "results.json").read_text())
    sc = res["scenario"]
    assert sc["as_expected"] is True
    history = [json.loads(l) for l in (store / "history.jsonl").read_text().splitlines()]
    faults = [o["f"] for o in history if o["process"] == "nemesis"]
    assert faults[:3] == ["kill", "partition", "start"] and faults[-2:] == ["final", "final-reads"]
    a = sc["aliases"]["A"]
    if era == "hw":
        first_a = next(t for t in sc["truncations"] if t["node"] == a)
        assert res["valid"] is False and res["checkers"]["log"]["counts"]["lost-write"] == 2
        # the follower truncated to its checkpointed HW 3 on restart; the two acknowledged
        # writes at offsets 3 and 4 are gone, and the results say which op acknowledged them
        assert (first_a["from"], first_a["to"]) == (5, 3)
        lost = sc["unread_acknowledged"]
        assert [w["offset"] for w in lost] == [3, 4] and all(w["acks"] == "all" for w in lost)
        acked = {o["index"]: o for o in history if o["type"] == "ok" and o["f"] == "send"}
        assert all(acked[w["op"]]["value"] == [0, [w["offset"], w["value"]]] for w in lost)
    else:
        assert res["valid"] is True and sc["unread_acknowledged"] == [] and sc["divergence"] == []
        assert not any(t["node"] == a for t in sc["truncations"])
    run_id = json.loads((store / "test.json").read_text())["run_id"]
    assert leftovers(run_id) == []


def test_a_wait_that_never_holds_names_the_step_and_tears_down(tmp_path):
    script = tmp_path / "never.yaml"
    script.write_text("""\
name: never
nodes: 2
settings: {min.insync.replicas: 1}
steps:
  - write: 2
  - pause: the controller
  - resume: ctl
  - partition: {one-way: {from: leader of key 0, to: a follower of key 0}}
  - heal:
  - kill: a follower of key 0
    as: F
  - wait: {until: F is down or leader of key 0 is none, timeout: 5}
  - restart: F
  - wait: {until: leo of F on key 0 >= 50, timeout: 2}
  - write: 1
""")
    out = harness(tmp_path, "--file", script, "--era", "epoch", "--store", tmp_path / "store",
                  "--subnet", "10.215.2.0/24")
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("harness: error: step 9 (wait): timed out after 2 s waiting until "
                           "`leo of F on key 0 >= 50`; last seen: leo of F on key 0 = "), last
    assert last.rsplit("= ", 1)[1] in ("2", "None")   # None: F has not answered since its restart
    store = run_dir(out)
    res = json.loads((store / "results.json").read_text())
    assert res["valid"] == "unknown" and res["error"].startswith("step 9 (wait)")
    history = [json.loads(l) for l in (store / "history.jsonl").read_text().splitlines()]
    nemesis = [(o["f"], o["value"]) for o in history if o["process"] == "nemesis"]
    follower = res["scenario"]["aliases"]["F"]
    leader = "n1" if follower == "n2" else "n2"
    assert nemesis == [("pause", ["ctl"]), ("resume", ["ctl"]),
                       ("partition", {"kind": "scripted", "grudge": {follower: [leader]}}),
                       ("heal", None), ("kill", [follower]), ("start", [follower])]
    assert [s["action"] for s in res["scenario"]["steps"]] == \
        ["write", "pause", "resume", "partition", "heal", "kill", "wait", "restart"]
    assert (store / "nodes" / "n1" / "broker.log").is_file()
    run_id = json.loads((store / "test.json").read_text())["run_id"]
    assert leftovers(run_id) == []


def test_bad_input_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - write: 1\n  - explode: n1\n")
    for args, text in ((["--file", bad, "--era", "hw"], "step 2: unknown step 'explode'"),
                       (["no-such-scenario", "--era", "hw"], "unknown scenario 'no-such-scenario'"),
                       (["hw-data-loss", "--era", "kafka3"], "--variant 'kafka3'"),
                       (["fast-failover", "--era", "hw", "--expect", "--subnet", "10.215.3.0/24"],
                        "declares no verdict for variant hw"),
                       # an option that removes a host the script names: refused before any host exists
                       (["kafka-client-resend", "--variant", "idempotent", "--option", "controllers=combined",
                         "--store", tmp_path / "never"], "unknown node 'ctl': not a host (n1..n3)")):
        out = harness(tmp_path, *args)
        assert out.returncode == 2, (args, out.stderr)
        assert text in out.stderr.strip().splitlines()[-1], out.stderr
    assert not (tmp_path / "never").exists()

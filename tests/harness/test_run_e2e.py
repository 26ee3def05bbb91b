"""A whole short run on real netns hosts with every fault: the store holds
everything the design lists, the history is well formed, the exit code is
the verdict in results.json, and nothing is left behind."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from hnetns_util import leftovers, needs_root
from hrun_util import read_history, run_harness

pytest.importorskip("replica.client")
pytestmark = [pytest.mark.root, needs_root, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    out = run_harness(tmp, "run", "--era", "epoch", "--nemesis", "kill,pause,partition",
                      "--nemesis-interval", "3", "--time-limit", "15", "--seed", "5",
                      "--subnet", "10.212.1.0/24", "--store", tmp / "store", "--rate", "60", "--json")
    doc = json.loads(out.stdout)   # `--json`: results.json with the store and the exit code, one document
    return tmp, out, Path(doc["store"])


def test_store_has_everything(run):
    tmp, out, store = run
    assert store.is_dir() and store.parent.parent == tmp / "store", out.stderr
    for name in ("test.json", "history.jsonl", "harness.log", "samples.jsonl", "results.json"):
        assert (store / name).is_file(), (name, out.stderr[-2000:])
    spec = json.loads((store / "test.json").read_text())
    assert spec["seed"] == 5 and spec["nemesis"] == ["kill", "pause", "partition"]
    history = [json.loads(l) for l in (store / "history.jsonl").read_text().splitlines()]
    [final] = [o["value"] for o in history if o["process"] == "nemesis" and o["f"] == "final-reads"]
    # the final reads' outcome is kept in the history, not only logged; test.json is the spec alone
    assert "final_reads" not in spec and isinstance(spec["t0_wall"], float)
    assert final["complete"] is True and {"0", "1"} <= set(final["keys"]), final
    for node in ("n1", "n2", "n3"):
        assert (store / "nodes" / node / "broker.log").stat().st_size > 0
        dump = json.loads((store / "nodes" / node / "dump.json").read_text())
        assert dump["broker"] == int(node[1:])
    assert (store / "nodes" / "ctl" / "controller.log").is_file()
    samples = [json.loads(l) for l in (store / "samples.jsonl").read_text().splitlines()]
    assert {s["node"] for s in samples} == {"n1", "n2", "n3"}
    assert (tmp / "store" / "latest").resolve() == store.resolve()


def test_exit_code_is_the_verdict(run):
    _, out, store = run
    results = json.loads((store / "results.json").read_text())
    expected = {True: 0, False: 1}.get(results["valid"], 2)
    assert out.returncode == expected, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["exit_code"] == expected and doc["valid"] == results["valid"] and doc["checkers"] == results["checkers"]
    # the epoch generation must survive every fault
    assert results["valid"] is True, results


def test_history_is_well_formed(run):
    _, _, store = run
    ops = read_history(store)
    assert [o["index"] for o in ops] == list(range(len(ops)))
    open_ops: dict = {}
    done_processes = set()
    completions = defaultdict(int)
    for o in ops:
        p = o["process"]
        if p == "nemesis":
            assert o["type"] == "info"
            continue
        assert p not in done_processes, f"process {p} reused after info"
        if o["type"] == "invoke":
            assert p not in open_ops, f"process {p} invoked twice"
            open_ops[p] = o
        else:
            inv = open_ops.pop(p)
            assert inv["f"] == o["f"]
            completions[o["type"]] += 1
            if o["type"] == "info":
                done_processes.add(p)
            if o["f"] == "send" and o["type"] == "ok":
                key, (offset, value) = o["value"]
                assert [key, value] == inv["value"] and offset >= 0
    assert not open_ops
    assert completions["ok"] > 50
    sent = [o["value"][1] for o in ops if o["f"] == "send" and o["type"] == "invoke"]
    assert len(sent) == len(set(sent)), "send values must be unique"
    fs = [o["f"] for o in ops if o["process"] == "nemesis"]
    assert "final" in fs and len(fs) >= 3
    # after the final heal, every key is polled
    final_at = max(i for i, o in enumerate(ops) if o["f"] == "final")
    polled = {int(k) for o in ops[final_at:] if o["f"] == "poll" and o["type"] == "ok" for k in o["value"]}
    assert polled == {0, 1, 2}


def test_nothing_left_behind(run):
    tmp, _, store = run
    run_id = json.loads((store / "test.json").read_text())["run_id"]
    assert leftovers(run_id) == []
    assert not any((tmp / "runs").glob("*.json"))
    assert not (tmp / "work" / run_id).exists()

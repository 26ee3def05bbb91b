"""Randomized schedule exploration: era epoch shows no violation, era hw loses
acknowledged writes, and a failing schedule replays exactly from its trace.

The suite runs a few dozen schedules to stay fast; the 1,000-schedule figure
comes from ``python -m replica.sim.explore --era epoch --schedules 1000 --seed 1``.
"""

import json

import pytest

from replica.sim import explore

pytestmark = pytest.mark.unit

# Printed (shrunk) by `python -m replica.sim.explore --era hw --schedules 1000 --seed 1`
# with an earlier version of the schedule generator: a follower restarts before any HW
# checkpoint exists, truncates to HW 0, and is elected when the leader's session expires.
RECORDED_HW_TRACE = {
    "seed": 1000007,
    "trace": [["produce", 2], ["wait", 10], ["crash", 1], ["crash", 2], ["crash", 3], ["restart", 3],
              ["wait", 3000], ["wait", 6000]],
}


def test_epoch_era_keeps_every_acknowledged_write():
    count, failures = explore.explore("epoch", 100, seed=1)
    assert count == 100 and failures == []


def test_hw_era_loses_a_write_and_the_trace_replays_exactly():
    count, failures = explore.explore("hw", 60, seed=1)
    assert failures, "era hw should lose an acknowledged write within 60 schedules of seed 1"
    first = failures[0]
    assert first.violation["kind"] in ("lost-write", "divergence")
    trace = json.loads(json.dumps(first.trace))         # what the module prints is what replays
    again = explore.replay(trace, "hw", first.seed)
    assert again.violation == first.violation
    assert explore.replay(trace, "epoch", first.seed).violation is None


@pytest.mark.parametrize("era,violates", [("hw", True), ("kip101", False), ("epoch", False)])
def test_recorded_hw_trace(era, violates):
    outcome = explore.replay(RECORDED_HW_TRACE["trace"], era, RECORDED_HW_TRACE["seed"])
    if violates:
        assert outcome.violation["kind"] == "lost-write" and outcome.violation["offset"] == 0
        assert outcome.violation["step"] == 7
    else:
        assert outcome.violation is None and outcome.acked == 1


def test_shrink_keeps_the_violation():
    trace = RECORDED_HW_TRACE["trace"] + [["wait", 5], ["heal"]]
    short = explore.shrink(trace, "hw", RECORDED_HW_TRACE["seed"], "lost-write")
    assert len(short) <= len(RECORDED_HW_TRACE["trace"])
    assert explore.replay(short, "hw", RECORDED_HW_TRACE["seed"]).violation["kind"] == "lost-write"


def test_cli_replay_exit_codes(tmp_path, capsys):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(RECORDED_HW_TRACE))
    assert explore.main(["--era", "hw", "--replay", str(path)]) == 1
    assert explore.main(["--era", "epoch", "--replay", str(path)]) == 0
    assert explore.main(["--era", "epoch", "--replay", str(tmp_path / "missing.json")]) == 2


def test_cli_replay_rejects_bad_traces(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"trace": [["explode", 1]]}))
    assert explore.main(["--era", "epoch", "--replay", str(bad)]) == 2
    bad.write_text(json.dumps([1, 2]))
    assert explore.main(["--era", "epoch", "--replay", str(bad)]) == 2

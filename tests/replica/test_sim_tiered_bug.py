"""The deliberate tiered bug (``remote.log.follower.skip.aux.state``) as the
explorer found it, replayed exactly; and the schedule as a scenario script.

Found by ``python -m replica.sim.explore --era epoch --tiered --skip-aux
--schedules 1000 --seed 1``: 1 schedule of 1000 violates (schedule seed
1000728, the 729th); the same 1000 schedules without the setting: none.
"""

import json

import yaml

from replica.sim import explore
from replica.sim.emit import scenario_text
import pytest

pytestmark = pytest.mark.unit

RECORDED = {"era": "epoch", "seed": 1000728, "tiered": True, "skip_aux": True,
            "trace": [["lag", 1], ["produce", 0, 9], ["wait", 2000], ["crash", "leader"],
                      ["crash", "follower", 2], ["wait", 12000], ["produce", 9, 6], ["wait", 12000],
                      ["wait", 20000], ["restart", "all"], ["wait", 2000], ["crash", "leader"],
                      ["restart", "all"], ["wait", 2000]]}


def test_skipping_aux_state_loses_the_acknowledged_write_and_the_correct_path_does_not():
    trace = json.loads(json.dumps(RECORDED["trace"]))
    bug = explore.replay(trace, "epoch", RECORDED["seed"], tiered=True, skip_aux=True)
    assert bug.violation is not None and bug.violation["kind"] == "lost-write"
    # A follower kept its own never-committed records 0..2 below its HW: the tier and
    # the leader hold the acknowledged 9, 10, 11 there.
    assert bug.violation["log"][:3] == [0, 1, 2] and bug.violation["value"] == 9
    correct = explore.replay(trace, "epoch", RECORDED["seed"], tiered=True, skip_aux=False)
    assert correct.violation is None and correct.acked == bug.acked > 0


def test_the_schedule_emits_as_a_scenario_script():
    outcome = explore.replay(RECORDED["trace"], "epoch", RECORDED["seed"], tiered=True, skip_aux=True)
    text = scenario_text({"era": "epoch", "seed": RECORDED["seed"], "violation": outcome.violation,
                          "skip_aux": True, "resolved": outcome.resolved},
                         explore.settings(tiered=True, skip_aux=True), name="tiered-skip-aux")
    script = yaml.safe_load(text)
    assert script["settings"]["remote.log.follower.skip.aux.state"] is True
    assert script["expect"] == {"epoch": {"valid": False, "anomalies": ["divergence"]}}
    steps = [next(iter(s)) for s in script["steps"]]
    assert steps[:3] == ["bind", "partition", "write"] and steps.count("kill") == 3
    assert script["steps"][2] == {"write": {"key": 0, "count": 9, "expect": "any", "parallel": True}}
    assert script["steps"][1] == {"partition": {"one-way": {"from": "A", "to": "C"}}}

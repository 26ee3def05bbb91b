"""Cell status against expectations, the comparison with the previous
campaign, and the campaign JUnit of a summary (validated against the schema)."""
from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema

from harness import junit
from harness.campaign.outcome import cell_status, compare, exit_code

pytestmark = pytest.mark.unit

XSD = Path(__file__).parent / "junit-10.xsd"


def runs(*verdicts, as_expected=None):
    return [{"verdict": v, "as_expected": as_expected, "anomalies": {"lost-write": 1} if v == "invalid" else {},
             "tag": f"seed-{i}", "seed": i, "id": f"c/seed-{i}"} for i, v in enumerate(verdicts)]


@pytest.mark.parametrize("expect,verdicts,status", [
    ("valid", ["valid", "valid"], "as-expected"),
    ("valid", ["valid", "invalid"], "unexpected"),
    ("valid", ["valid", "unknown"], "unknown"),
    ("valid", ["not-run", "not-run"], "not-run"),
    ("invalid", ["valid", "invalid"], "as-expected"),
    ("invalid", ["valid", "valid"], "unexpected"),
    ("invalid", ["valid", "unknown"], "unknown"),
    ("any", ["valid", "invalid"], "as-expected"),
    ("any", ["unknown"], "unknown"),
])
def test_cell_status(expect, verdicts, status):
    assert cell_status(expect, runs(*verdicts)) == status


def test_scenario_cells_follow_the_scenario_verdict():
    assert cell_status("scenario", runs("invalid", as_expected=True)) == "as-expected"
    assert cell_status("scenario", runs("valid", as_expected=False)) == "unexpected"
    assert cell_status("scenario", runs("unknown")) == "unknown"


def cell(cid, status, verdicts=("valid",), changed=False, expect="valid"):
    rs = runs(*verdicts)
    return {"id": cid, "label": cid, "status": status, "as_expected": status == "as-expected", "expect": expect,
            "why": "", "runs": rs, "changed": changed,
            "mixed": "valid" in verdicts and "invalid" in verdicts}


def test_comparison_new_failures_fixed_flaky():
    prev = {"stamp": "T1", "cells": [cell("a", "as-expected"), cell("b", "unexpected"), cell("c", "as-expected"),
                                     cell("d", "unexpected", changed=True)]}
    now = {"stamp": "T2", "cells": [cell("a", "unexpected", ("invalid",)), cell("b", "as-expected"),
                                    cell("c", "as-expected", ("valid", "invalid"), expect="any"),
                                    cell("d", "as-expected"), cell("e", "as-expected")]}
    out = compare(now, prev)
    assert out["previous"] == "T1"
    assert out["new_failures"] == ["a"] and out["fixed"] == ["b", "d"]
    assert set(out["flaky"]) == {"c", "d"}  # c: its runs disagree; d: flipped twice in a row
    assert [c["comparison"] for c in now["cells"]] == ["new-failure", "fixed", "same", "fixed", "new"]
    assert exit_code(now) == 1
    assert compare({"cells": [cell("a", "as-expected")]}, None)["previous"] is None


def test_campaign_junit_validates_and_marks_new_failures(tmp_path):
    now = {"stamp": "T2", "cells": [cell("replica/epoch/kill", "unexpected", ("valid", "invalid")),
                                    cell("replica/hw/kill", "as-expected", ("valid", "invalid"), expect="invalid"),
                                    cell("replica/kip101/pause", "not-run", ("not-run",)),
                                    cell("replica/epoch/pause", "unknown", ("unknown",))]}
    prev = {"stamp": "T1", "cells": [cell("replica/epoch/kill", "as-expected")]}
    now["comparison"] = compare(now, prev)
    cases = junit.campaign_cases(tmp_path, now)
    path = junit.write(tmp_path / "j.xml", "campaign <&> test", cases)
    xmlschema.XMLSchema(str(XSD)).validate(str(path))
    outcomes = [c.outcome for c in cases]
    assert outcomes == ["passed", "failure", "passed", "passed", "skipped", "error"]
    assert cases[1].message.startswith("NEW FAILURE (as expected in campaign T1)")
    assert cases[1].classname == "replica/epoch/kill" and cases[1].name == "seed-1"
    assert cases[1].properties["seed"] == 1
    text = path.read_text()
    assert 'failures="1"' in text and 'errors="1"' in text and "&lt;&amp;&gt;" in text


def test_campaign_junit_carries_time_to_first_anomaly(tmp_path):
    c = cell("replica/hw/kill", "as-expected", ("valid", "invalid", "invalid"), expect="invalid")
    c["runs"][1]["ttfa_s"], c["runs"][2]["ttfa_s"] = 12.5, 20.0
    c["ttfa_median_s"], c["with_anomaly"], c["counts"] = 16.25, 2, {"done": 3}
    cases = junit.campaign_cases(tmp_path, {"stamp": "T", "cells": [c]})
    path = junit.write(tmp_path / "j.xml", "ttfa", cases)
    xmlschema.XMLSchema(str(XSD)).validate(str(path))
    assert [k.properties["ttfa_s"] for k in cases] == [None, 12.5, 20.0]
    assert {k.properties["cell_ttfa_median_s"] for k in cases} == {16.25}
    assert {k.properties["cell_with_anomaly"] for k in cases} == {"2/3"}
    assert '<property name="cell_ttfa_median_s" value="16.25"' in path.read_text()


def test_a_run_row_says_which_faults_it_drew_and_junit_carries_them(tmp_path):
    """A false-alarm campaign is only as good as its faults: each run's starts by
    kind (not heals, not the final phase) and its targeted plays, counted once each."""
    import json

    from harness.campaign.verdicts import faults_of
    ops = [{"index": 0, "process": 0, "type": "invoke", "f": "send", "value": [0, 1]},
           {"index": 1, "process": "nemesis", "type": "info", "f": "kill", "value": ["n1"],
            "why": {"play": "follower-then-leader", "step": 1}},
           {"index": 2, "process": "nemesis", "type": "info", "f": "kill", "value": ["n2"],
            "why": {"play": "follower-then-leader", "step": 2}},
           {"index": 3, "process": "nemesis", "type": "info", "f": "start", "value": ["n1", "n2"]},
           {"index": 4, "process": "nemesis", "type": "info", "f": "partition", "value": {"n1": ["n2"]}},
           {"index": 5, "process": "nemesis", "type": "info", "f": "heal", "value": None},
           {"index": 6, "process": "nemesis", "type": "info", "f": "final", "value": None}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops) + "{torn")
    drawn = faults_of(tmp_path)
    assert drawn == {"faults": {"kill": 2, "partition": 1}, "plays": {"follower-then-leader": 1}}
    assert faults_of(tmp_path / "missing") == {"faults": {}, "plays": {}}
    c = cell("replica/epoch/kill+partition", "as-expected")
    c["runs"][0].update(drawn)
    case, = junit.campaign_cases(tmp_path, {"stamp": "T", "cells": [c]})
    assert case.properties["faults"] == "kill 2, partition 1"
    assert case.properties["plays"] == "follower-then-leader 1"

"""Issue 26: a real replica run under `--nemesis-mode targeted` records why
it picked each target; the mode is refused in one line when misspelled."""
from __future__ import annotations

import pytest

from hnetns_util import needs_root
from hrun_util import read_history, run_harness
from nemesis.targeted import MOMENTS, PLAYS


@pytest.mark.root
@needs_root
@pytest.mark.timeout(300)
def test_targeted_run_records_why(tmp_path):
    """Every fault start carries why (play, moment, nodes) and hits the nodes it names."""
    out = run_harness(tmp_path, "run", "--era", "hw", "--nemesis", "kill", "--nemesis-mode", "targeted",
                      "--time-limit", "16", "--nemesis-interval", "4", "--seed", "3",
                      "--subnet", "10.245.20.0/24", "--store", tmp_path / "store")
    assert out.returncode in (0, 1), out.stderr[-2000:]
    store = next((tmp_path / "store").glob("*/2*"))
    starts = [o for o in read_history(store) if o["process"] == "nemesis" and o["f"] == "kill"]
    assert len(starts) >= 2, starts
    for op in starts:
        why = op["why"]
        assert why["moment"] in MOMENTS and why["play"] in {p for _, p, _ in PLAYS}
        assert op["value"] == why["nodes"]
        assert set(why["nodes"]) <= {"n1", "n2", "n3"}


@pytest.mark.unit
def test_unknown_nemesis_mode_is_one_line_exit_2(tmp_path):
    out = run_harness(tmp_path, "run", "--nemesis", "kill", "--nemesis-mode", "aimed")
    assert out.returncode == 2 and "random, targeted" in out.stderr, out.stderr

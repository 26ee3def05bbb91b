"""Role hosts a system lists as fault targets (the replica's tiered store) are
picked by the random schedule like data nodes; other role hosts never are."""
import random

from harness.sut import HostPlan
from nemesis.fault import View, choose_nodes
from nemesis.kill import KILL
import pytest

pytestmark = pytest.mark.unit


def test_the_store_host_is_a_kill_target_and_the_controller_is_not():
    plan = HostPlan(["n1", "n2", "n3"], {"controller": "ctl", "store": "store"}, ["store"])
    picks = [tuple(choose_nodes(KILL, random.Random(i), View(plan)).nodes) for i in range(300)]
    assert ("store",) in picks and not any("ctl" in p for p in picks)
    share = picks.count(("store",)) / len(picks)
    assert 0.05 < share < 0.4
    plain = HostPlan(["n1", "n2", "n3"], {"controller": "ctl"})
    assert all("store" not in choose_nodes(KILL, random.Random(i), View(plain)).nodes for i in range(100))

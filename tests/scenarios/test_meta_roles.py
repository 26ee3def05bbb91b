"""Scenario roles in the system's metadata group (`the metadata leader`,
`metadata follower I`): parsed before any host exists, refused for a system
without the capability, resolved against the group the nodes report."""
from __future__ import annotations

import pytest

from scenarios import ScenarioError
from scenarios.roles import Layout, Ref, RefError, parse_ref, resolve
from scenarios.script import parse

pytestmark = pytest.mark.unit

LAYOUT = Layout(nodes=3, keys=1, replication_factor=3)
GROUP = {"leader": "n2", "members": ["n1", "n2", "n3"]}


@pytest.mark.parametrize("text, ref", [
    ("the metadata leader", Ref("meta-leader")),
    ("metadata leader", Ref("meta-leader")),
    ("the meta leader", Ref("meta-leader")),
    ("a metadata follower", Ref("meta-follower", index=1)),
    ("metadata follower 2", Ref("meta-follower", index=2)),
])
def test_metadata_roles_parse(text, ref):
    assert parse_ref(text, LAYOUT, set()) == ref


def test_metadata_followers_are_the_other_members_in_name_order():
    assert resolve(Ref("meta-leader"), {}, {}, GROUP) == "n2"
    assert resolve(Ref("meta-follower", index=1), {}, {}, GROUP) == "n1"
    assert resolve(Ref("meta-follower", index=2), {}, {}, GROUP) == "n3"
    with pytest.raises(RefError, match="the metadata group has no leader now"):
        resolve(Ref("meta-leader"), {}, {}, {"leader": None, "members": ["n1", "n2", "n3"]})
    with pytest.raises(RefError, match="no leader now"):
        resolve(Ref("meta-follower", index=1), {}, {}, None)
    with pytest.raises(RefError, match="has 2 followers"):
        parse_ref("metadata follower 3", LAYOUT, set())


def _script(system: str, steps: list) -> dict:
    return {"name": "meta", "system": system, "nodes": 3, "keys": 1, "steps": steps}


def test_a_system_without_a_metadata_group_refuses_the_role_in_one_line():
    steps = [{"write": 1}, {"kill": "the metadata leader"}]
    with pytest.raises(ScenarioError) as err:
        parse(_script("replica", steps))
    msg = str(err.value)
    assert "\n" not in msg and "system 'replica' does not support 'meta-group'" in msg and "step 2" in msg
    assert parse(_script("nats", steps)).system == "nats"
    bind = [{"bind": {"M": "the metadata leader", "A": "metadata follower 1"}}, {"kill": ["A"]}, {"pause": "M"}]
    assert [s.action for s in parse(_script("nats", bind)).steps] == ["bind", "kill", "pause"]


def test_a_condition_cannot_follow_the_metadata_group_but_a_bound_name_can():
    with pytest.raises(ScenarioError, match="conditions do not follow the metadata group; bind it"):
        parse(_script("nats", [{"wait": "leader of key 0 is the metadata leader"}]))
    ok = [{"bind": {"M": "the metadata leader"}}, {"wait": "leader of key 0 is not M"}]
    assert parse(_script("nats", ok)).steps[1].action == "wait"

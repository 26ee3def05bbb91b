"""The `wait until` language and role resolution, over hand-built observations
shaped like the system-independent metadata (KeyMeta) and node states (ReplicaState)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from scenarios import conditions as c
from scenarios import roles

pytestmark = pytest.mark.unit

LAYOUT = roles.Layout(nodes=3, keys=2, replication_factor=3, roles={"controller": "ctl"})


def obs(leader=1, epoch=2, isr=(1, 2, 3), leos=(5, 5, 3), hws=(3, 3, 3), roles_=None, up=None, **kw):
    replicas = [1, 2, 3]
    n = lambda b: None if b is None else f"n{b}"  # noqa: E731
    meta = {0: {"leader": n(leader), "leader_epoch": epoch, "isr": [n(b) for b in isr],
                "replicas": [n(b) for b in replicas]},
            1: {"leader": "n2", "leader_epoch": 0, "isr": ["n2"], "replicas": ["n2", "n3", "n1"]}}
    roles_ = roles_ or {b: ("leader" if b == leader else "follower") for b in replicas}
    states = {f"n{b}": {0: {"role": roles_[b], "leader_epoch": epoch, "leo": leos[b - 1], "hw": hws[b - 1]}}
              for b in replicas}
    return c.Observation(metadata=meta, states=states, up=up or {"n1": True, "n2": True, "n3": True, "ctl": True},
                         **kw)


def holds(text, o, bound=()):
    return c.evaluate(c.parse(text, LAYOUT, set(bound)), o)


def test_roles_resolve_against_the_controller_metadata():
    meta = obs(leader=2).metadata
    ref = lambda t: roles.resolve(roles.parse_ref(t, LAYOUT, set()), meta, {})
    assert ref("leader of key 0") == "n2"
    assert ref("a follower of key 0") == "n1" and ref("follower 2 of key 0") == "n3"
    assert ref("the controller") == "ctl" and ref("n3") == "n3"
    assert ref("leader of key 1") == "n2" and ref("a follower of key 1") == "n3"
    no_leader = obs(leader=None).metadata
    with pytest.raises(roles.RefError, match="key 0 has no leader now"):
        roles.resolve(roles.parse_ref("leader of key 0", LAYOUT, set()), no_leader, {})


def test_leader_needs_the_controller_and_the_broker_to_agree():
    assert holds("leader of key 0 is n1", obs())[0]
    assert not holds("leader of key 0 is n2", obs())[0]
    # the controller names n1, but n1 has not taken over yet
    assert not holds("leader of key 0 is n1", obs(roles_={1: "follower", 2: "follower", 3: "follower"}))[0]
    assert holds("leader of key 0 is A", obs(aliases={"A": "n1"}), ["A"])[0]
    assert holds("leader of key 0 is not n2", obs())[0]
    assert holds("leader of key 0 is none", obs(leader=None))[0]
    assert holds("no leader for key 0", obs(leader=None))[0]
    assert not holds("leader of key 0 is n1", c.Observation())[0]   # no metadata: never true


def test_isr_clauses():
    assert holds("isr of key 0 is full", obs())[0]
    assert not holds("isr of key 0 is full", obs(isr=(1, 2)))[0]
    assert holds("isr of key 0 excludes n3 and isr size of key 0 is 2", obs(isr=(1, 2)))[0]
    assert holds("isr of key 0 includes F", obs(aliases={"F": "n2"}), ["F"])[0]
    assert holds("isr size of key 0 >= 2", obs())[0]


def test_offsets_compare_with_numbers_and_with_other_quantities():
    o = obs(leos=(5, 4, 3), hws=(3, 3, 3))
    assert holds("leo of n2 on key 0 >= 4", o)[0]
    assert holds("leo of n2 on key 0 reaches 4 and hw of n1 on key 0 == 3", o)[0]
    assert not holds("leo of n3 on key 0 > 3", o)[0]
    assert holds("leo of n3 on key 0 reaches hw of n1 on key 0", o)[0]
    assert not holds("leo of n3 on key 0 >= leo of n1 on key 0", o)[0]
    assert holds("leader epoch of key 0 > 1", o)[0]
    o.checkpoints = {"n2": {0: 3}}
    assert holds("checkpointed hw of n2 on key 0 >= 3", o)[0]
    assert not holds("checkpointed hw of n3 on key 0 >= 0", o)[0]  # not read: unknown, not true


def test_role_election_and_up_down():
    assert holds("role of a follower of key 0 on key 0 is follower", obs())[0]
    assert holds("election on key 0", obs(epoch=3, epoch_baseline={0: 2}))[0]
    assert not holds("election on key 0", obs(epoch=2, epoch_baseline={0: 2}))[0]
    assert holds("n2 is down", obs(up={"n2": False}))[0]
    assert holds("the controller is up", obs())[0]


def test_the_last_value_is_reported_for_each_clause():
    ok, seen = holds("leader of key 0 is n2 and leo of n3 on key 0 >= 5", obs(leos=(5, 5, 3)))
    assert not ok
    assert seen == "leader of key 0 = n1; leo of n3 on key 0 = 3"
    ok, seen = holds("leo of n2 on key 0 >= 1", obs(), )
    assert ok and "= 5" in seen


def test_a_node_that_does_not_answer_makes_its_clauses_false():
    o = obs()
    del o.states["n2"]
    ok, seen = holds("leo of n2 on key 0 >= 0", o)
    assert not ok and seen == "leo of n2 on key 0 = None"
    assert holds("role of n2 on key 0 is follower", o) == (False, "role of n2 on key 0 = no answer")


@pytest.mark.parametrize("text", ["", "leo of ctl on key 0 >= 1", "leo of n1 on key 9 >= 1",
                                  "leo of n1 on key 0 >= lots", "isr of key 0 is big"])
def test_bad_conditions(text):
    with pytest.raises(c.ConditionError):
        c.parse(text, LAYOUT, set())


@given(st.integers(0, 50), st.integers(0, 50), st.sampled_from([">=", "<=", "==", "!=", ">", "<"]))
def test_comparisons_match_python(leo, v, op):
    import operator
    py = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
          ">": operator.gt, "<": operator.lt}[op]
    assert holds(f"leo of n1 on key 0 {op} {v}", obs(leos=(leo, 0, 0)))[0] == py(leo, v)


def test_or_of_ands():
    o = obs(leader=None)
    assert holds("leader of key 0 is n2 or leader of key 0 is none", o)[0]
    assert not holds("leader of key 0 is n2 or leader of key 0 is none and isr size of key 0 is 1", o)[0]
    assert holds("leader of key 0 is n2 or leader of key 0 is none and isr size of key 0 is 3", o)[0]
    ok, seen = holds("leader of key 0 is n2 or leader of key 0 is n3", obs())
    assert not ok and seen == "leader of key 0 = n1"    # each value once


def test_tiered_quantities_local_log_start_and_remote_end():
    o = obs()
    o.states["n2"][0].update(local_log_start=9, remote_end=9, log_start=0)
    assert holds("local log start of n2 on key 0 >= 9 and remote end of n2 on key 0 >= 9", o)[0]
    assert holds("log start of n2 on key 0 == 0", o)[0]
    assert not holds("local log start of n1 on key 0 >= 0", o)[0]      # not reported: unknown
    cond = c.parse("local  log start of n2 on key 0 > 3", LAYOUT, set())
    assert cond.clauses[0].lhs.text() == "local log start of n2 on key 0"
    assert c.needs(cond) == c.needs(c.parse("leo of n2 on key 0 > 3", LAYOUT, set()))


def test_the_store_host_exists_only_with_tiered_storage():
    from systems.replica import SYSTEM

    plain = SYSTEM.host_plan(3, settings={})
    tiered = SYSTEM.host_plan(3, settings={"remote.storage.enable": True})
    assert plain.roles == {"controller": "ctl"} and plain.fault_hosts == []
    assert tiered.roles == {"controller": "ctl", "store": "store"} and tiered.fault_hosts == ["store"]

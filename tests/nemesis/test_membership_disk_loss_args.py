"""Faults disk-loss and membership, in-process: which system refuses them (one line,
naming the fault and why), how a scenario step's argument is read, and partition's
partial heal."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness import registry
from harness import spec as harness_spec
from nemesis.fault import FaultArgError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("fault", ["disk-loss", "membership"])
def test_nats_refuses_in_one_line(fault):
    with pytest.raises(ValidationError) as e:
        harness_spec.TestSpec(system="nats", nemesis=[fault])
    text = str(e.value.errors()[0]["msg"])
    assert f"fault {fault}" in text and "nats" in text and "\n" not in text


@pytest.mark.parametrize("system", ["replica", "kafka"])
@pytest.mark.parametrize("fault", ["disk-loss", "membership"])
def test_the_replica_and_kafka_take_them(system, fault):
    sut = registry.system(system)
    sut.capabilities_in(sut.default_settings(3), sut.parse_options({})).require_fault(registry.fault(fault))


def test_kafka_before_2_4_refuses_membership_in_one_line():
    with pytest.raises(ValidationError) as e:
        harness_spec.TestSpec(system="kafka", system_options={"version": "0.11.0.3"}, nemesis=["membership"])
    text = str(e.value.errors()[0]["msg"])
    assert "fault membership" in text and "KIP-455" in text and "\n" not in text


def test_membership_step_arguments():
    kind = registry.fault("membership")
    move = kind.parse({"move": {"key": 0, "to": ["B", "C"]}}, stopping=False)
    assert move.refs() == ["B", "C"]
    t = move.resolve(lambda r: {"B": "n2", "C": "n3"}[r], None)
    assert t.detail["to"] == ["n2", "n3"] and t.detail["key"] == 0
    retire = kind.parse({"retire": "B"}, stopping=False)
    assert retire.resolve(lambda r: "n2", None).nodes == ["n2"]
    for bad in ({"move": {"key": 0, "to": ["B", "B"]}}, {"move": {"to": ["B"]}}, {"retire": 3}, "B", {"grow": 1}):
        with pytest.raises(FaultArgError):
            kind.parse(bad, stopping=False)
    assert kind.parse(None, stopping=True) is None
    with pytest.raises(FaultArgError):
        kind.parse({"key": 0}, stopping=True)


def test_disk_loss_step_arguments_and_ops():
    kind = registry.fault("disk-loss")
    assert (kind.start, kind.stop, kind.stop_step_name) == ("disk-loss", "disk-restart", "disk-restart")
    assert kind.parse("B", stopping=False).refs() == ["B"]


def test_a_heal_may_name_the_cuts_it_heals():
    kind = registry.fault("partition")
    assert kind.parse(None, stopping=True) is None
    part = kind.parse({"one-way": {"from": "A", "to": "ctl"}}, stopping=True)

    class Plan:
        hosts = ["ctl", "n1", "n2"]

    g = part.resolve(lambda r: {"A": "n1", "ctl": "ctl"}[r], Plan()).detail
    assert not g.has_edge("n1", "ctl") and g.has_edge("ctl", "n1")   # the one edge to heal
    with pytest.raises(FaultArgError):
        kind.parse("n1", stopping=True)

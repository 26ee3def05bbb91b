"""The Kafka adapter's settings and options, without a JVM: Kafka's own names
only (a typo is refused with the nearest name), a server.properties per role,
the topic's settings apart from the brokers', and the events read from a
broker log written by Kafka 4.1 (tests/data/kafka/kafka-4.1-events.log)."""
from pathlib import Path

import pytest

from scenarios.script import ScenarioError, load_scenario, parse
from systems.kafka import SYSTEM, plan_roles
from systems.kafka import settings as names
from systems.kafka.config import render, topic_config
from systems.kafka.events import story_events
from systems.kafka.inspector import KafkaInspector

pytestmark = pytest.mark.unit
DATA = Path(__file__).resolve().parents[1] / "data" / "kafka"


def test_unknown_setting_is_refused_with_the_nearest_name():
    with pytest.raises(ValueError) as e:
        names.check({"segmnt.bytes": 1}, "4.1.1")
    assert "unknown Kafka 4.1 setting 'segmnt.bytes'" in str(e.value) and "'segment.bytes'" in str(e.value)
    names.check({"min.insync.replicas": 2, "log.flush.interval.messages": 1, "segment.bytes": 1 << 20}, "4.1.1")


def test_a_later_line_without_its_own_list_uses_the_nearest_below():
    assert names.known("4.2.1") == names.known("4.1.1")


def test_options_are_checked_before_any_host():
    with pytest.raises(Exception) as e:
        SYSTEM.parse_options({"version": "3.8.1"})
    assert "4.0.0 or later" in str(e.value)
    with pytest.raises(Exception):
        SYSTEM.parse_options({"fsync": "sometimes"})
    assert plan_roles({}, SYSTEM.parse_options({})) == {"controller": "ctl"}
    assert plan_roles({}, SYSTEM.parse_options({"controllers": "combined"})) == {}


def test_properties_per_role_and_the_topic_settings_apart():
    options = SYSTEM.parse_options({"fsync": "every"})
    addresses = {"ctl": "10.0.0.10", "n1": "10.0.0.11", "n2": "10.0.0.12"}
    settings = {"min.insync.replicas": 2, "unclean.leader.election.enable": True, "internal.segment.bytes": 16384,
                "replica.lag.time.max.ms": 5000}
    broker = dict(line.split("=", 1) for line in render("n1", "broker", addresses, ["ctl"], "/d", settings,
                                                         options, 2).splitlines())
    assert broker["process.roles"] == "broker" and broker["node.id"] == "1"
    assert broker["controller.quorum.voters"] == "100@10.0.0.10:9093"
    assert broker["listeners"] == "PLAINTEXT://10.0.0.11:9092"
    assert broker["log.flush.interval.messages"] == "1" and broker["replica.lag.time.max.ms"] == "5000"
    assert broker["unclean.leader.election.enable"] == "true" and "internal.segment.bytes" not in broker
    ctl = dict(line.split("=", 1) for line in render("ctl", "controller", addresses, ["ctl"], "/c", settings,
                                                      options, 2).splitlines())
    assert ctl["listeners"] == "CONTROLLER://10.0.0.10:9093" and "advertised.listeners" not in ctl
    assert topic_config(settings, options) == {"min.insync.replicas": 2, "unclean.leader.election.enable": True,
                                               "internal.segment.bytes": 16384, "flush.messages": 1}


def test_events_from_the_logs_of_a_kafka_41_unclean_election():
    """tests/data/kafka/events: the lines of a real kafka-unclean-election run
    (unclean-on) that the readers look at: the controller's partition changes
    (DEBUG) and the brokers' leadership, recovery and truncation lines."""
    inspector = KafkaInspector(None)
    events = {n: inspector.events(DATA / "events" / n, n) for n in ("n1", "n2", "n3")}
    kinds = {(e["event"], e["node"]) for evs in events.values() for e in evs}
    assert {("isr-shrink", "n2"), ("isr-expand", "n1"), ("truncate", "n2"), ("truncate", "n3")} <= kinds
    assert all(set(e["out"]).isdisjoint(e["isr"]) for evs in events.values() for e in evs
               if e["event"] == "isr-shrink")
    assert [e["to"] for e in events["n2"] if e["event"] == "truncate"] == [10]
    # A fetcher truncation that the log says removed nothing is no event.
    assert not any(e["event"] == "truncate" and "high watermark 0" in e.get("reason", "")
                   for evs in events.values() for e in evs)
    story = story_events(DATA / "events")
    unclean = [e for e in story if e["kind"] == "elect" and "unclean" in e["text"]]
    assert [(e["leader"], e["epoch"]) for e in unclean] == [("n1", 3)]
    truncated = [e for e in story if e["kind"] == "truncate"]
    assert {(e["node"], e["leo"], e["to"]) for e in truncated} == {("n2", 30, 10), ("n3", 30, 10)}


def test_the_kafka_scenarios_name_their_own_variants():
    s = load_scenario("kafka-last-replica-standing")
    assert s.variant_names() == ("elr-off", "elr-on")
    assert s.variant_options("elr-off") == {"elr": False}
    u = load_scenario("kafka-unclean-election")
    assert u.variant_settings("unclean-on")["unclean.leader.election.enable"] is True
    with pytest.raises(ScenarioError) as e:
        parse({"name": "x", "system": "kafka", "variants": {"a": {"options": {"elr": "maybe"}}},
               "steps": [{"write": 1}]})
    assert "variants.a.options" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        parse({"name": "x", "system": "kafka", "variants": {"a": {}}, "expect": {"b": "valid"},
               "steps": [{"write": 1}]})
    assert "'b' is not a variant of scenario 'x'" in str(e.value)

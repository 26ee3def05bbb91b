"""The ZooKeeper-era Kafka versions (0.10.2.2, 0.11.0.3, 2.8.2) without a JVM:
version options and the `zk` role host, each line's own properties and setting
names (KRaft-only names rendered as their ZooKeeper-era equivalents), the pom
profile and jar name per line, and the events read from the logs of a real
0.10.2.2 run of kafka-hw-data-loss (tests/data/kafka-0.10.2/events/)."""
from pathlib import Path

import pytest

from systems.kafka import SYSTEM, ZK_VERSIONS, install, plan_roles
from systems.kafka import settings as names
from systems.kafka.config import render_zk_broker, render_zookeeper, topic_config
from systems.kafka.events import log_events, story_events, zk_controller_events

pytestmark = pytest.mark.unit
EVENTS = Path(__file__).resolve().parents[1] / "data" / "kafka-0.10.2" / "events"
ADDR = {"zk": "10.240.1.2", "n1": "10.240.1.11", "n2": "10.240.1.12"}


def props(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_zookeeper_versions_are_variants_with_a_zk_host():
    assert set(ZK_VERSIONS) <= set(SYSTEM.variants)
    for v in ZK_VERSIONS:
        assert plan_roles({}, SYSTEM.parse_options({"version": v})) == {"zookeeper": "zk"}
    assert plan_roles({}, SYSTEM.parse_options({"version": "4.1.1"})) == {"controller": "ctl"}
    with pytest.raises(Exception) as e:
        SYSTEM.parse_options({"version": "1.1.1"})
    assert "0.10.2.2" in str(e.value) and "4.0.0 or later" in str(e.value)


def test_pom_profile_and_jar_per_line():
    assert [(install.profile(v), install.broker_jar(v)) for v in ("0.10.2.2", "2.8.2", "4.1.1")] == [
        ("zk", "kafka_2.12-0.10.2.2.jar"), ("zk", "kafka_2.12-2.8.2.jar"), ("kraft", "kafka_2.13-4.1.1.jar")]
    pom = install.POM.read_text()
    assert "<id>zk</id>" in pom and "<id>kraft</id>" in pom and "jaxb-api" in pom


@pytest.mark.parametrize("version", ZK_VERSIONS)
def test_broker_properties_of_each_line(version):
    opts = SYSTEM.parse_options({"version": version})
    settings = {"min.insync.replicas": 1, "broker.session.timeout.ms": 4000, "broker.heartbeat.interval.ms": 500,
                "replica.lag.time.max.ms": 8000, "unclean.leader.election.interval.ms": 1000}
    names.check(settings, version)
    p = props(render_zk_broker("n2", ADDR, "zk", "/d/n2/data", settings, opts, 2))
    assert p["broker.id"] == "2" and p["zookeeper.connect"] == "10.240.1.2:2181"
    assert p["listeners"] == "PLAINTEXT://10.240.1.12:9092" and p["log.dirs"] == "/d/n2/data"
    assert p["zookeeper.session.timeout.ms"] == "4000" and p["replica.lag.time.max.ms"] == "8000"
    assert "broker.session.timeout.ms" not in p and "broker.heartbeat.interval.ms" not in p
    assert "unclean.leader.election.interval.ms" not in p and "node.id" not in p and "process.roles" not in p
    assert ("transaction.state.log.replication.factor" in p) == (version != "0.10.2.2")   # 0.10.2 has no transactions
    broker, _topic = names.known(version)
    assert set(p) <= broker, set(p) - broker
    assert topic_config(settings, opts) == {"min.insync.replicas": 1}
    cfg = props(render_zookeeper("/d/zk/data", "10.240.1.2"))
    assert cfg["clientPort"] == "2181" and cfg["admin.enableServer"] == "false"


def test_kraft_names_are_refused_where_there_is_no_equivalent():
    with pytest.raises(ValueError) as e:
        names.check({"eligible.leader.replicas.enable": True}, "0.10.2.2")
    assert "unknown Kafka 0.10 setting" in str(e.value)
    with pytest.raises(ValueError):
        names.check({"transaction.state.log.min.isr": 1}, "0.10.2.2")   # 0.11 and later
    names.check({"transaction.state.log.min.isr": 1}, "0.11.0.3")


def test_events_of_a_real_0_10_2_hw_data_loss():
    n1 = [e for e in log_events(EVENTS / "n1" / "kafka.log", "n1") if e["key"] == 0]
    n2 = [e for e in log_events(EVENTS / "n2" / "kafka.log", "n2") if e["key"] == 0]
    assert [(e["event"], e.get("isr")) for e in n1 if e["event"].startswith("isr")] == [
        ("isr-expand", ["n1", "n2"]), ("isr-shrink", ["n1"])]
    # A (n2) truncated to its checkpointed HW 3 although its log ended at 5
    assert [(e["event"], e["to"]) for e in n2 if e["event"] == "truncate"] == [("truncate", 0), ("truncate", 3)]
    # B (n1) came back ahead of the new leader: its fetch offset reset from 5 to 3
    assert {"event": "truncate", "from": 5, "to": 3} in [
        {k: e[k] for k in ("event", "from", "to")} for e in n1 if e["event"] == "truncate"]
    elections = zk_controller_events([EVENTS / "zk" / "controller.log"])
    assert [(e["node"], e["leader_epoch"], e["unclean"]) for e in elections][:2] == [("n1", 1, False), ("n2", 2, True)]
    story = story_events(EVENTS)
    unclean = [e for e in story if e["kind"] == "elect" and "unclean" in e.get("text", "")]
    assert [(e["leader"], e["epoch"]) for e in unclean] == [("n2", 2)]


def test_acting_roles_follow_the_brokers_own_fetcher_lines():
    """ZooKeeper era: a replica's role is what its broker acts as (systems/kafka/events.ActingRoles),
    read from the log as it grows, so a script waits for the broker, not the controller's metadata."""
    from systems.kafka.events import ActingRoles

    a = ActingRoles()
    text = (EVENTS / "n2" / "kafka.log").read_text()
    a.feed(text[: len(text) // 3])     # fed in pieces, cut mid-line: a partial line waits for the rest
    a.feed(text[len(text) // 3:])
    a.feed("\n")
    assert a.by_key == {0: "stopped"}    # n2 was elected (unclean) and removed its fetcher
    assert a.role(0, named_leader=True) == "leader"
    assert a.role(0, named_leader=False) == "none"   # stopped fetching, not (yet) named: between roles

    b = ActingRoles()   # 2.x's spelling; a restart forgets what the broker did before
    b.feed("[2026-11-27T05:00:00.000Z] INFO [ReplicaFetcherManager on broker 2] Added fetcher to broker 1 "
           "for partitions Map(log-0 -> InitialFetchState(...), log-10 -> InitialFetchState(...)) "
           "(kafka.server.ReplicaFetcherManager)\n")
    assert b.role(0, named_leader=False) == "follower" and b.role(10, named_leader=False) == "follower"
    assert b.role(1, named_leader=True) == "none"
    b.feed("[2026-11-27T05:00:01.000Z] INFO [KafkaServer id=2] starting (kafka.server.KafkaServer)\n")
    assert b.role(0, named_leader=True) == "none"
    b.feed("[2026-11-27T05:00:02.000Z] INFO [ReplicaFetcherManager on broker 2] Removed fetcher for partitions "
           "Set(__consumer_offsets-0, log-0) (kafka.server.ReplicaFetcherManager)\n")
    assert b.role(0, named_leader=True) == "leader" and b.role(10, named_leader=True) == "none"
    b.feed("[2026-11-27T05:00:03.000Z] INFO [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Shutting down "
           "(kafka.server.ReplicaFetcherThread)\n")
    assert b.role(0, named_leader=True) == "none"      # its LeaderAndIsr is not answered yet
    b.feed("[2026-11-27T05:00:29.000Z] INFO [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Shutdown "
           "completed (kafka.server.ReplicaFetcherThread)\n")
    assert b.role(0, named_leader=True) == "leader"
    c = ActingRoles()   # 0.11's spelling, from a real run (fast-failover: B's fetcher blocked on dead A)
    c.feed("[2026-11-27T06:40:33.570Z] INFO [ReplicaFetcherManager on broker 2] Removed fetcher for partitions "
           "log-0 (kafka.server.ReplicaFetcherManager)\n"
           "[2026-11-27T06:40:33.584Z] INFO [ReplicaFetcherThread-0-1]: Shutting down "
           "(kafka.server.ReplicaFetcherThread)\n")
    assert c.role(0, named_leader=True) == "none"
    c.feed("[2026-11-27T06:40:59.617Z] INFO [ReplicaFetcherThread-0-1]: Shutdown completed "
           "(kafka.server.ReplicaFetcherThread)\n")
    assert c.role(0, named_leader=True) == "leader"
    c.feed("[2026-11-27T05:49:57.584Z] INFO [ReplicaFetcherThread-0-1], Shutting down "
           "(kafka.server.ReplicaFetcherThread)\n")   # 0.10.2's comma
    assert c.role(0, named_leader=True) == "none"

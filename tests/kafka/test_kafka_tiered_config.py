"""Kafka tiered storage without a JVM (systems/kafka/tiered.py): what the option
adds to a broker's and the controller's properties and to the topic, what turns
it on, and the remote end and remote dump read from LocalTieredStorage's
folder layout (segments built by tests/kafka/test_segments.build_batch)."""
import pytest

from scenarios.script import load_scenario
from systems.kafka import SYSTEM, tiered
from systems.kafka.config import render, topic_config
from systems.kafka.compare import eras_of
from tests.kafka.test_segments import build_batch

pytestmark = pytest.mark.unit
ADDRESSES = {"ctl": "10.0.0.10", "n1": "10.0.0.11", "n2": "10.0.0.12"}


def props(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_the_option_or_the_topic_setting_turns_it_on():
    assert not tiered.enabled({}, SYSTEM.parse_options({}))
    assert tiered.enabled({}, SYSTEM.parse_options({"tiered": True}))
    assert tiered.enabled({"remote.storage.enable": True}, SYSTEM.parse_options({}))
    assert not tiered.enabled({"remote.storage.enable": False}, SYSTEM.parse_options({}))


def test_broker_controller_and_topic_settings():
    options = SYSTEM.parse_options({"tiered": True})
    settings = {"remote.log.manager.task.interval.ms": 200, "local.retention.ms": 5000}
    store = ("/build/kafka/4.1.1/tiered/kafka-storage-4.1.1-test.jar", "/work/run/remote-store")
    broker = props(render("n1", "broker", ADDRESSES, ["ctl"], "/d", settings, options, 2, tiered_store=store))
    assert broker["remote.log.storage.system.enable"] == "true"
    assert broker["remote.log.storage.manager.class.name"] == tiered.RSM_CLASS
    assert broker["remote.log.storage.manager.class.path"] == store[0]
    assert broker["rsm.config.dir"] == store[1]
    assert broker["remote.log.metadata.manager.listener.name"] == "PLAINTEXT"
    assert broker["rlmm.config.remote.log.metadata.topic.replication.factor"] == "2"
    assert broker["remote.log.manager.task.interval.ms"] == "200"      # the run's own value wins
    assert broker["log.retention.check.interval.ms"] == "500"           # tiered storage's default
    assert "local.retention.ms" not in broker
    ctl = props(render("ctl", "controller", ADDRESSES, ["ctl"], "/c", settings, options, 2, tiered_store=store))
    assert ctl["remote.log.storage.system.enable"] == "true" and "rsm.config.dir" not in ctl
    plain = props(render("n1", "broker", ADDRESSES, ["ctl"], "/d", {}, SYSTEM.parse_options({}), 2))
    assert not any(k.startswith(("remote.log", "rsm.", "rlmm.")) for k in plain)
    topic = topic_config(settings, options)
    assert topic == {"remote.storage.enable": True, "local.retention.ms": 5000, "internal.segment.bytes": 230}
    assert topic_config({"segment.bytes": 1 << 20}, options).get("internal.segment.bytes") is None


def test_zookeeper_era_releases_refuse_it():
    with pytest.raises(Exception) as e:
        SYSTEM.check_settings({"remote.storage.enable": True}, SYSTEM.parse_options({"version": "2.8.2"}))
    assert "unknown" in str(e.value) or "4.x" in str(e.value)


def test_remote_end_and_dump_from_the_local_tiered_storage_layout(tmp_path):
    remote = tmp_path / "remote-store"
    part = remote / tiered.ROOT / "log-0-N3EapDneT_2lYMlhUqMCwg"
    part.mkdir(parents=True)
    other = remote / tiered.ROOT / "log-10-N3EapDneT_2lYMlhUqMCwg"   # another partition, same prefix digits
    other.mkdir()
    (other / "00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA.log").write_bytes(build_batch(0, [b"9"] * 50))
    assert tiered.remote_end(str(remote), "log", 0) == -1
    assert tiered.remote_dump(str(remote), "log", 1)["partitions"] == []
    for base in (0, 3):
        batches = b"".join(build_batch(base + i, [str(base + i).encode()], epoch=1) for i in range(3))
        (part / f"{base:020d}-SEGMENTID{base:013d}.log").write_bytes(batches)
        (part / f"{base:020d}-SEGMENTID{base:013d}.index").write_bytes(b"")
    assert tiered.remote_end(str(remote), "log", 0) == 6
    assert tiered.remote_end(str(remote), "log", 10) == 50
    dump = tiered.remote_dump(str(remote), "log", 1)
    assert dump["broker"] == "remote" and "errors" not in dump
    p = dump["partitions"][0]
    assert (p["log_start"], p["hw"], p["leo"]) == (0, 6, 6)
    assert [(r[0], r[1], r[3]) for r in p["records"]] == [(o, 1, o) for o in range(6)]


def test_the_three_tiered_scenarios_load_and_compare_on_the_epoch_era_only():
    for name in ("kafka-tiered-fresh-follower", "kafka-tiered-out-of-sync-follower",
                 "kafka-tiered-multiple-hard-failures"):
        sc = load_scenario(name)
        assert sc.system == "kafka" and sc.variant_names() == ("4.1.1", "4.2.1")
        assert sc.settings["remote.storage.enable"] is True
        assert eras_of(name.removeprefix("kafka-")) == {"epoch": ("4.1.1",)}
    assert "hw" in eras_of("hw-data-loss")

"""Settings: Kafka's names and defaults, JSON file and --set, one-line errors."""

import json

import pytest

from replica import config as cfg

pytestmark = pytest.mark.unit


def test_defaults_per_era():
    assert cfg.defaults("hw")["replica.lag.time.max.ms"] == 10000
    assert cfg.defaults("epoch")["replica.lag.time.max.ms"] == 30000
    d = cfg.defaults("kip101")
    assert d["replica.fetch.wait.max.ms"] == 500
    assert d["replica.high.watermark.checkpoint.interval.ms"] == 5000
    assert d["min.insync.replicas"] == 1
    assert d["unclean.leader.election.enable"] is False
    assert d["flush.messages"] == cfg.NEVER and d["flush.ms"] == cfg.NEVER
    assert (d["isr.change.propagation.interval.ms"], d["isr.change.propagation.blackout.ms"],
            d["isr.change.propagation.max.interval.ms"]) == (2500, 5000, 60000)


def test_file_then_set_flags(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"min.insync.replicas": 2, "flush.messages": 1}))
    c = cfg.load("epoch", str(path), ["min.insync.replicas=3", "unclean.leader.election.enable=true"])
    assert c["min.insync.replicas"] == 3 and c["flush.messages"] == 1
    assert c["unclean.leader.election.enable"] is True


@pytest.mark.parametrize("sets,needle", [
    (["no.such.key=1"], "no.such.key"),
    (["min.insync.replicas=two"], "min.insync.replicas"),
    (["min.insync.replicas=0"], "min.insync.replicas"),
    (["unclean.leader.election.enable=maybe"], "unclean.leader.election.enable"),
    (["novalue"], "novalue"),
])
def test_bad_settings_name_the_key_on_one_line(sets, needle):
    with pytest.raises(cfg.ConfigError) as e:
        cfg.load("hw", None, sets)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("[1, 2]")
    with pytest.raises(cfg.ConfigError, match="JSON object"):
        cfg.load("hw", str(path))
    with pytest.raises(cfg.ConfigError, match="cannot read"):
        cfg.load("hw", str(tmp_path / "missing.json"))


def test_topic_overrides_are_limited():
    base = cfg.defaults("epoch")
    assert cfg.topic_config(base, {"min.insync.replicas": 2})["min.insync.replicas"] == 2
    with pytest.raises(cfg.ConfigError, match="replica.lag.time.max.ms"):
        cfg.topic_config(base, {"replica.lag.time.max.ms": 5})

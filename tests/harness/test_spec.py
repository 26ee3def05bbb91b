"""Spec resolution: file values, CLI overrides, defaults and the seed."""
from __future__ import annotations

import pytest

from harness.spec import SpecError, build_spec, parse_settings
from harness.spec import TestSpec as Spec

pytestmark = pytest.mark.unit


def test_file_then_flags(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("era: hw\nnemesis: [kill]\ntime-limit: 30\nnodes: 5\nsettings:\n  flush.messages: 1\n")
    spec = build_spec(str(f), time_limit=12, nemesis="kill,partition")
    assert spec.system_options == {"era": "hw"} and spec.nodes == 5
    assert spec.time_limit == 12  # flag wins
    assert spec.nemesis == ["kill", "partition"]
    assert spec.settings == {"flush.messages": 1, "min.insync.replicas": 2}
    assert spec.name == "log-hw" and spec.replication_factor == 3
    assert isinstance(spec.seed, int)
    # the resolved spec round-trips through test.json
    assert Spec.model_validate(spec.model_dump()) == spec


def test_small_clusters_resolve_safely():
    spec = build_spec(nodes=1)
    assert spec.replication_factor == 1 and spec.settings["min.insync.replicas"] == 1
    with pytest.raises(SpecError, match="replication_factor"):
        build_spec(nodes=2, replication_factor=3)


def test_settings_parse_as_scalars():
    assert parse_settings(["a.b=5", "c=true", "d=x"]) == {"a.b": 5, "c": True, "d": "x"}

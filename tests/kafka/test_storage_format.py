"""A KRaft node's storage from the format template (systems/kafka/storage_format.py): what
Kafka's StorageTool wrote once, given each node's cluster id, node id and a new
directory id, and read back by StorageTool as a formatted directory."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from systems.kafka import DEFAULT_VERSION, install
from systems.kafka import storage_format as sf
from systems.kafka.segments import read_meta_properties

FEATURES = ["--feature", "eligible.leader.replicas.version=0", "--feature", "transaction.version=2"]
CLUSTER = "q1w2e3r4T5y6u7i8o9p0aA"


def _props(data_dir: Path, node: int, roles: str = "broker", extra: str = "") -> str:
    return (f"process.roles={roles}\nnode.id={node}\ncontroller.quorum.voters=1@127.0.0.1:19093\n"
            f"log.dirs={data_dir}\nlisteners=PLAINTEXT://127.0.0.1:19092\ncontroller.listener.names=CONTROLLER\n"
            f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n{extra}")


def _put(local: str, remote: str) -> None:
    Path(remote).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(local, remote)


def _storage_info(props: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-cp", str(install.lib_dir(DEFAULT_VERSION)) + "/*", "kafka.tools.StorageTool",
                           "info", "-c", str(props)], capture_output=True, text=True, timeout=120)


@pytest.mark.root
@pytest.mark.timeout(300)
def test_nodes_get_the_templates_checkpoint_and_their_own_ids_and_kafka_reads_them(tmp_path):
    template = sf.template_for(DEFAULT_VERSION, "java", FEATURES, _props(tmp_path / "x", 2))
    assert template is not None and {p.name for p in template.iterdir()} == sf.TEMPLATE_FILES
    # the same version and features: the same template, whatever the node and its role
    assert sf.template_for(DEFAULT_VERSION, "java", FEATURES, _props(tmp_path / "y", 1, "controller")) == template
    ids = []
    for node in (2, 3):
        data = tmp_path / f"n{node}"
        assert sf.fill(template, str(data), CLUSTER, node, _put)
        assert (data / "bootstrap.checkpoint").read_bytes() == (template / "bootstrap.checkpoint").read_bytes()
        meta = read_meta_properties(str(data))
        assert (meta["cluster.id"], meta["node.id"], meta["version"]) == (CLUSTER, str(node), "1")
        ids.append(meta["directory.id"])
        props = tmp_path / f"n{node}.properties"
        props.write_text(_props(data, node))
        info = _storage_info(props)
        assert info.returncode == 0, info.stdout + info.stderr
        assert f"cluster.id={CLUSTER}" in info.stdout and f"node.id={node}" in info.stdout, info.stdout
        assert "Found problem" not in info.stdout, info.stdout
    assert len(set(ids)) == 2 and all(len(i) == 22 and not i.startswith("-") for i in ids)
    # formatted already: left as it is (StorageTool's --ignore-formatted)
    before = (tmp_path / "n2" / "meta.properties").read_text()
    assert not sf.fill(template, str(tmp_path / "n2"), "otherclusterid00000000", 2, _put)
    assert (tmp_path / "n2" / "meta.properties").read_text() == before


@pytest.mark.root
@pytest.mark.timeout(300)
def test_another_feature_level_is_another_template_and_odd_layouts_get_none(tmp_path):
    one = sf.template_for(DEFAULT_VERSION, "java", FEATURES, _props(tmp_path / "a", 2))
    other = sf.template_for(DEFAULT_VERSION, "java", FEATURES[:2] + ["--feature", "transaction.version=0"],
                            _props(tmp_path / "a", 2))
    assert one is not None and other is not None and one != other
    assert (one / "bootstrap.checkpoint").read_bytes() != (other / "bootstrap.checkpoint").read_bytes()
    assert sf.template_for(DEFAULT_VERSION, "java", FEATURES,
                           _props(tmp_path / "a", 2).replace(f"log.dirs={tmp_path / 'a'}",
                                                             f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}")) is None
    assert sf.template_for(DEFAULT_VERSION, "java", FEATURES,
                           _props(tmp_path / "a", 2, extra=f"metadata.log.dir={tmp_path / 'm'}\n")) is None


@pytest.mark.root
@pytest.mark.timeout(300)
def test_a_failing_storage_tool_is_one_line_and_leaves_no_template(tmp_path):
    with pytest.raises(sf.FormatError, match="StorageTool format failed: .*Unsupported feature"):
        sf.template_for(DEFAULT_VERSION, "java", ["--feature", "no.such.feature=1"], _props(tmp_path / "a", 2))
    root = install.lib_dir(DEFAULT_VERSION).parent / "storage-format"
    assert not [p for p in root.iterdir() if p.name.startswith(".making-")]

"""NATS server versions as system options: Debian's package by default, or a
release from the Go module proxy (scripts/nats-server.sh, go install, cached
under build/nats/<version>/), and JetStream's `sync_interval`, which only
2.10 and later accept."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from systems.nats import NatsOptions
from systems.nats.config import NodeAddress, render
from tests.harness.hrun_util import run_harness
from tests.nats.natsutil import NatsCluster, need_root, until

REPO = Path(__file__).resolve().parents[2]
NODES = [NodeAddress("n1", "10.212.0.11"), NodeAddress("n2", "10.212.0.12"), NodeAddress("n3", "10.212.0.13")]
RELEASE = "2.12.1"


@pytest.mark.unit
def test_options_name_a_release_or_debian_and_sync_interval_needs_2_10():
    assert NatsOptions().version == "debian"
    assert NatsOptions(version="v2.12.1", sync_interval="always").version == "2.12.1"
    assert NatsOptions(version="2.10.23", sync_interval="10s").sync_interval == "10s"
    with pytest.raises(ValueError, match="give debian .* or a release X.Y.Z"):
        NatsOptions(version="latest")
    with pytest.raises(ValueError, match="sync_interval needs nats-server 2.10 or later; version debian"):
        NatsOptions(sync_interval="always")
    with pytest.raises(ValueError, match="needs nats-server 2.10 or later; version 2.9.25"):
        NatsOptions(version="2.9.25", sync_interval="always")
    with pytest.raises(ValueError, match="give always or a duration"):
        NatsOptions(version="2.12.1", sync_interval="sometimes")


@pytest.mark.unit
def test_sync_interval_goes_into_the_jetstream_block_only_when_asked():
    plain = render(NODES[0], NODES, "/d")
    assert "sync_interval" not in plain
    text = render(NODES[0], NODES, "/d", sync_interval="always")
    block = text[text.index("jetstream {"):text.index("}", text.index("jetstream {"))]
    assert 'sync_interval: "always"' in block


@pytest.mark.unit
def test_bad_options_are_one_line_and_exit_2(tmp_path):
    for option, words in (("version=latest", "give debian"), ("sync_interval=always", "2.10 or later"),
                          ("speed", "expected key=value")):
        out = run_harness(tmp_path, "run", "--sut", "nats", "--option", option, "--time-limit", "5",
                          "--subnet", "10.212.5.0/24", "--store", str(tmp_path / "s"), timeout=60)
        assert out.returncode == 2, out.stderr
        lines = [l for l in out.stderr.strip().splitlines() if l.strip()]
        assert len(lines) == 1 and words in lines[0], out.stderr


@pytest.mark.unit
def test_the_install_script_refuses_a_bad_version_in_one_line():
    out = subprocess.run(["bash", str(REPO / "scripts" / "nats-server.sh"), "2.12"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "give X.Y.Z" in out.stderr


@pytest.mark.root
@pytest.mark.slow
def test_a_release_runs_the_cluster_with_sync_interval_always(tmp_path):
    """The release's binary (installed on demand: go install, ~1.5 min once) runs every node;
    the servers report that version and take sync_interval."""
    need_root()
    if not (REPO / "build" / "nats" / RELEASE / "bin" / "nats-server").exists() and shutil.which("go") is None:
        pytest.skip("no go to install nats-server " + RELEASE)
    with NatsCluster("10.212.6.0/24", keys=1, tmp=tmp_path, version=RELEASE, sync_interval="always") as c:
        c.db.setup()
        assert all(c.db.binary[n].endswith(f"build/nats/{RELEASE}/bin/nats-server") for n in c.db.nodes)
        assert 'sync_interval: "always"' in Path(c.db.conf_path("n1")).read_text()

        async def version_and_a_publish():
            nc = await nats.connect(c.db.servers(), connect_timeout=2)
            try:
                client = c.db.client(5.0)
                await until(lambda: _ready(client), timeout=60)
                offset = await client.send(0, 7)
                await client.close()
                return nc.connected_server_version, offset
            finally:
                await nc.close()

        version, offset = c.run(version_and_a_publish)
    assert f"v{RELEASE}" in str(version) and offset == 0


async def _ready(client):
    await client.create(1, 3)
    meta = await client.metadata()
    return meta.get(0) is not None and meta[0].leader is not None

"""The per-node nats-server configuration: what 2.9.10 accepts, and what the
harness refuses before any host exists."""
import shutil
import subprocess

import pytest

from systems.nats.config import NodeAddress, check_settings, render

pytestmark = pytest.mark.unit

NODES = [NodeAddress("n1", "10.221.0.11"), NodeAddress("n2", "10.221.0.12"), NodeAddress("n3", "10.221.0.13")]


def test_routes_to_every_other_node_and_server_name_is_the_host():
    text = render(NODES[0], NODES, "/data/n1", {"max_payload": 65536})
    assert 'server_name: "n1"' in text
    assert "nats-route://10.221.0.12:6222" in text and "nats-route://10.221.0.13:6222" in text
    assert "nats-route://10.221.0.11" not in text
    assert 'store_dir: "/data/n1"' in text and "max_payload: 65536" in text


def test_sync_interval_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="sync_interval.*2.9.10"):
        check_settings({"sync_interval": "1s"})
    with pytest.raises(ValueError, match="unknown nats-server setting 'bogus'"):
        check_settings({"bogus": 1})


def _binary() -> str:
    return shutil.which("nats-server") or "/usr/sbin/nats-server"


def test_the_server_rejects_sync_interval_too(tmp_path):
    """Why the harness refuses it: 2.9.10 does not start with it."""
    conf = tmp_path / "s.conf"
    conf.write_text(render(NODES[0], NODES, str(tmp_path / "d")).replace("jetstream {", "jetstream {\n  sync_interval: \"1s\""))
    out = subprocess.run([_binary(), "-t", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and 'unknown field "sync_interval"' in out.stderr


def test_nats_server_itself_accepts_the_file(tmp_path):
    """`nats-server -t` (config test) on every node's file, as 2.9.10 parses it."""
    binary = _binary()
    for node in NODES:
        conf = tmp_path / f"{node.name}.conf"
        conf.write_text(render(node, NODES, str(tmp_path / node.name), {"max_file_store": 2**30}))
        out = subprocess.run([binary, "-t", "-c", str(conf)], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr

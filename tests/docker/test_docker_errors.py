"""Every way the docker backend can fail to start says so in one line naming
the host and the fix, and leaves nothing behind."""
from __future__ import annotations

import paramiko
import pytest

from harness.cluster.base import ClusterError
from harness.cluster.docker import host_addresses
from harness.remote.ssh import SshRemote, new_ed25519_key

from dockertest_util import labelled, new_cluster

pytestmark = pytest.mark.docker


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_no_engine(docker_ready):
    c = new_cluster(docker_url="unix:///var/run/no-such-docker.sock")
    with pytest.raises(ClusterError) as e:
        c.create()
    msg = _one_line(e)
    assert "no Docker engine at unix:///var/run/no-such-docker.sock" in msg
    assert "scripts/ensure-docker.sh" in msg


def test_missing_image(docker_ready):
    c = new_cluster(image="harness-node:no-such-tag")
    with pytest.raises(ClusterError) as e:
        c.create()
    assert "harness-node:no-such-tag not found" in _one_line(e)
    assert "docker/build-base.sh" in str(e.value)
    assert labelled(c.run_id) == []


def test_image_without_sshd_fails_midway_and_cleans_up(docker_ready):
    # The bare base image's command exits at once: containers and network
    # exist when the failure is seen, and must be gone afterwards.
    c = new_cluster(nodes=1, image="harness-base:bookworm")
    with pytest.raises(ClusterError) as e:
        c.create()
    msg = _one_line(e)
    assert "sshd did not come up" in msg and "docker/build-base.sh" in msg
    assert labelled(c.run_id) == []


def test_subnet_in_use(cluster):
    c = new_cluster(subnet=cluster.subnet)
    with pytest.raises(ClusterError) as e:
        c.create()
    msg = _one_line(e)
    assert cluster.subnet in msg and "--subnet" in msg
    assert labelled(c.run_id) == []


@pytest.mark.parametrize("subnet", ["10.211.0.0/30", "not-a-net", "fd00::/64"])
def test_bad_subnet(subnet):
    with pytest.raises(ClusterError) as e:
        host_addresses(subnet, 3)
    assert "--subnet" in _one_line(e)


def _remote(cluster, host="n1", **kw) -> SshRemote:
    address = kw.pop("address", cluster.addresses[host])
    known = paramiko.HostKeys()
    host_key = kw.pop("host_key", None) or cluster._read_host_key(host)
    known.add(address, host_key.get_name(), host_key)
    return SshRemote(host, address, pkey=kw.pop("pkey", cluster.key), host_keys=kw.pop("host_keys", known),
                     connect_timeout=2, **kw)


def test_wrong_client_key(cluster):
    r = _remote(cluster, pkey=new_ed25519_key())
    with pytest.raises(ClusterError) as e:
        r.connect()
    msg = _one_line(e)
    assert f"n1 (root@{cluster.addresses['n1']})" in msg
    assert "key was refused" in msg and "authorized_keys" in msg


def test_changed_host_key(cluster):
    r = _remote(cluster, host_key=new_ed25519_key())
    with pytest.raises(ClusterError) as e:
        r.connect()
    msg = _one_line(e)
    assert "host key changed" in msg and cluster.addresses["n1"] in msg and "ssh-keygen -R" in msg


def test_unknown_host_key_is_rejected_not_accepted(cluster):
    r = _remote(cluster, host_keys=paramiko.HostKeys())
    with pytest.raises(ClusterError) as e:
        r.connect()
    assert "host key unknown" in _one_line(e)


def test_unreachable_host(cluster):
    # An address of our own bridge's subnet that no container has.
    r = _remote(cluster, address=cluster.subnet.replace(".0/24", ".200"))
    with pytest.raises(ClusterError) as e:
        r.connect()
    msg = _one_line(e)
    assert "unreachable over SSH" in msg and ".200" in msg and "port 22" in msg


def test_runs_without_a_subnet_share_the_engine(cluster):
    """Two runs that name no subnet both come up, each on its own /24."""
    a, b = new_cluster(nodes=1), new_cluster(nodes=1)
    try:
        a.create()
        b.create()
        assert len({a.subnet, b.subnet, cluster.subnet}) == 3
        for c in (a, b):
            assert c.subnet.startswith("10.211.") and c.remotes["n1"].run(["hostname"]).stdout == "n1\n"
    finally:
        a.destroy()
        b.destroy()
    assert labelled(a.run_id) == [] and labelled(b.run_id) == []

"""The ssh backend against hosts it knows only by address, user, key and
known_hosts file: containers running sshd (made by the docker backend, whose
key and pinned host keys are written to files and handed over as a user
would)."""
from __future__ import annotations

import secrets
import signal

import paramiko
import pytest

from harness.cleanup import RunRecord
from harness.cluster.base import ClusterError
from harness.cluster.ssh import SshCluster, parse_nodes, release_ssh
from harness.remote.ssh import new_ed25519_key
from nemesis.network import CHAIN, Network
from nemesis.grudges import components

from dockertest_util import RECORDS, REPO

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def ssh_files(cluster, tmp_path_factory):
    key, known = cluster.write_ssh_files(str(tmp_path_factory.mktemp("ssh")))
    hosts = [cluster.addresses[h] for h in ("ctl", "n1", "n2", "n3")]
    return key, known, hosts


def process_gone(remote, pid: int, within: float = 10.0) -> bool:
    """The SIGKILLed process is gone: no /proc entry, or only a zombie (dead, not yet reaped
    by the container's init: the first check sometimes came before the reaping)."""
    gone = (f"! [ -e /proc/{pid} ] || grep -q '^State:[[:space:]]*Z' /proc/{pid}/status")
    wait = f"for i in $(seq {int(within * 10)}); do if {gone}; then exit 0; fi; sleep 0.1; done; exit 1"
    return remote.run(["sh", "-c", wait], check=False).returncode == 0


def _ssh_cluster(ssh_files, **kw) -> SshCluster:
    key, known, hosts = ssh_files
    run_id = "s" + secrets.token_hex(3)
    record = RunRecord(run_id, run_dir=RECORDS)
    return SshCluster(run_id, kw.pop("hosts", hosts), record, key_path=kw.pop("key", key),
                      known_hosts=kw.pop("known", known), **kw)


def test_parse_nodes():
    assert parse_nodes("h0,h1:2222") == {"ctl": ("h0", 22), "n1": ("h1", 2222)}
    assert parse_nodes(["n1=b", "ctl=a"]) == {"n1": ("b", 22), "ctl": ("a", 22)}
    for bad in ("h0", "ctl=a,h1", "ctl=a,n2=b", "h0,h1:x"):
        with pytest.raises(ClusterError):
            parse_nodes(bad)


def test_existing_hosts_run_daemons_faults_and_clean_up(cluster, ssh_files):
    c = _ssh_cluster(ssh_files)
    try:
        c.create()
        assert set(c.remotes) == {"ctl", "n1", "n2", "n3"}
        c.install_code(str(REPO), ("replica",))
        n1, n2 = c.remotes["n1"], c.remotes["n2"]
        assert n1.address == cluster.addresses["n1"]
        out = n1.run(["env", f"PYTHONPATH={c.layout.code_dir}", "python3", "-c", "import replica.wire"])
        assert out.returncode == 0
        pid = n2.start_daemon("n2", ["sleep", "300"], f"{c.layout.work_dir}/n2/broker.log")
        n2.signal("n2", signal.SIGSTOP)
        assert n2.daemon_running("n2")
        n2.run(["iptables", "-w", "-A", "INPUT", "-s", n1.address, "-j", "DROP"])
        probe = f"import socket; socket.create_connection(('{n2.address}', 22), timeout=1).close()"
        assert n1.run(["python3", "-c", probe], check=False).returncode != 0
        n2.run(["iptables", "-w", "-D", "INPUT", "-s", n1.address, "-j", "DROP"])
        assert n1.run(["python3", "-c", probe], check=False).returncode == 0
    finally:
        c.destroy()
    # Seen through the docker backend's own connection: nothing left.
    docker_n2 = cluster.remotes["n2"]
    assert process_gone(docker_n2, pid)
    assert docker_n2.run(["test", "-e", c.base_dir], check=False).returncode != 0


def test_release_after_a_crash(cluster, ssh_files):
    c = _ssh_cluster(ssh_files)
    c.create()
    pid = c.remotes["n3"].start_daemon("n3", ["sleep", "300"], f"{c.layout.work_dir}/n3/broker.log")
    Network(c.remotes).apply(components([["n1"], ["n3"]]))  # a partition never healed
    assert CHAIN in cluster.remotes["n3"].run(["iptables", "-w", "-S", "INPUT"]).stdout
    for r in c.remotes.values():  # the harness "dies": connections gone, nothing cleaned
        r.close()
    done = release_ssh(c.record.data["resources"])
    assert len(done) == 4 and all(": not cleaned" not in d for d in done)
    docker_n3 = cluster.remotes["n3"]
    assert process_gone(docker_n3, pid)
    assert docker_n3.run(["test", "-e", c.base_dir], check=False).returncode != 0
    assert CHAIN not in docker_n3.run(["iptables", "-w", "-S"]).stdout


def test_wrong_key_changed_host_key_and_missing_files(cluster, ssh_files, tmp_path):
    key, known, hosts = ssh_files
    other = tmp_path / "other_key"
    new_ed25519_key().write_private_key_file(str(other))
    c = _ssh_cluster(ssh_files, key=str(other))
    with pytest.raises(ClusterError, match=r"the key was refused \(--ssh-key .*other_key\)"):
        c.create()
    assert c.remotes == {}

    changed = paramiko.HostKeys(known)
    target = hosts[2]
    changed.add(target, "ssh-ed25519", new_ed25519_key())
    changed_path = tmp_path / "known_changed"
    changed.save(str(changed_path))
    with pytest.raises(ClusterError, match=rf"n2 \(root@{target}\): host key changed.*ssh-keygen -R {target}"):
        _ssh_cluster(ssh_files, known=str(changed_path)).create()

    with pytest.raises(ClusterError, match="--ssh-key .*: no such file"):
        _ssh_cluster(ssh_files, key=str(tmp_path / "absent")).create()
    with pytest.raises(ClusterError, match="--known-hosts .*: no such file"):
        _ssh_cluster(ssh_files, known=str(tmp_path / "absent")).create()


def test_hashed_known_hosts(ssh_files, tmp_path):
    """known_hosts files written by `ssh-keyscan -H` hash the host names."""
    key, known, hosts = ssh_files
    hashed = paramiko.HostKeys()
    for host, keys in paramiko.HostKeys(known).items():
        for keytype, hk in keys.items():
            hashed.add(paramiko.HostKeys.hash_host(host), keytype, hk)
    path = tmp_path / "known_hashed"
    hashed.save(str(path))
    lines = path.read_text().splitlines()
    assert lines and all(line.startswith("|1|") for line in lines)
    c = _ssh_cluster(ssh_files, known=str(path))
    try:
        c.create()
        assert c.remotes["n3"].run(["hostname"]).stdout.strip() == "n3"
    finally:
        c.destroy()

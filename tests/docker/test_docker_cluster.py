"""The docker backend's hosts, driven over SSH as the harness drives them."""
from __future__ import annotations

import signal
import subprocess
import time

import pytest

from harness.cluster.base import Remote
from harness.cluster.docker import LABEL_RUN, docker_client

pytestmark = pytest.mark.docker


def test_hosts_are_containers_on_an_internal_network(cluster):
    client = docker_client()
    net = client.networks.get(cluster.network_name)
    assert net.attrs["Internal"] is True
    assert net.attrs["IPAM"]["Config"][0]["Subnet"] == cluster.subnet
    assert net.attrs["Labels"][LABEL_RUN] == cluster.run_id
    assert set(cluster.remotes) == {"ctl", "n1", "n2", "n3"}
    for name, remote in cluster.remotes.items():
        assert isinstance(remote, Remote)
        assert remote.run(["hostname"]).stdout.strip() == name
        addrs = remote.run(["ip", "-4", "-o", "addr", "show", "eth0"]).stdout
        assert f" {remote.address}/" in addrs
        container = client.containers.get(cluster.container_name(name))
        assert "NET_ADMIN" in container.attrs["HostConfig"]["CapAdd"]
        assert container.labels[LABEL_RUN] == cluster.run_id
    # No route out of the internal network.
    routes = cluster.remotes["n1"].run(["ip", "-4", "route"]).stdout
    assert "default" not in routes


def test_run_quotes_arguments_and_reports_failures(cluster):
    r = cluster.remotes["n1"]
    tricky = ["a b", "$(hostname)", "'quoted'", "semi;colon", "*", ""]
    out = r.run(["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *tricky]).stdout
    assert out.strip() == '["a b", "$(hostname)", "\'quoted\'", "semi;colon", "*", ""]'
    done = r.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    with pytest.raises(subprocess.CalledProcessError) as e:
        r.run(["false"])
    assert e.value.returncode == 1


def test_run_timeout_kills_the_command_on_the_host(cluster):
    r = cluster.remotes["n2"]
    with pytest.raises(subprocess.TimeoutExpired):
        r.run(["sleep", "77"], timeout=1)
    # The host-side `timeout` ends it shortly after.
    for _ in range(50):
        if r.run(["pgrep", "-f", "^sleep 77$"], check=False).returncode != 0:
            break
        time.sleep(0.1)
    assert r.run(["pgrep", "-f", "^sleep 77$"], check=False).returncode != 0


def test_daemon_lifecycle_by_pid(cluster, tmp_path):
    r = cluster.remotes["n3"]
    log = "/var/lib/replog/n3/d.log"
    script = "import os, signal, sys, time\n" \
             "signal.signal(signal.SIGTERM, lambda *a: (print('term', flush=True), sys.exit(0)))\n" \
             "print('env', os.environ['GREETING'], flush=True)\n" \
             "while True: time.sleep(0.05)\n"
    pid = r.start_daemon("d", ["python3", "-c", script], log, env={"GREETING": "hello world"})
    assert r.daemon_running("d")
    assert r.run(["cat", f"/proc/{pid}/comm"]).stdout.strip() == "python3"
    with pytest.raises(RuntimeError):
        r.start_daemon("d", ["sleep", "1"], log)
    r.signal("d", signal.SIGSTOP)
    assert r.daemon_running("d")  # paused is still running
    assert r.run(["ps", "-o", "stat=", "-p", str(pid)]).stdout.strip().startswith("T")
    r.signal("d", signal.SIGCONT)
    r.signal("d", signal.SIGTERM)
    for _ in range(100):
        if not r.daemon_running("d"):
            break
        time.sleep(0.05)
    assert not r.daemon_running("d")
    r.signal("d", signal.SIGKILL)  # gone: a no-op, not an error
    r.get(log, str(tmp_path / "d.log"))
    assert (tmp_path / "d.log").read_text() == "env hello world\nterm\n"
    # The name can be reused once the old process is gone; SIGKILL works too.
    pid2 = r.start_daemon("d", ["sleep", "300"], log)
    assert pid2 != pid and r.daemon_running("d")
    r.signal("d", signal.SIGKILL)
    assert not r.daemon_running("d")


def test_put_and_get_round_trip_a_tree(cluster, tmp_path):
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "top.txt").write_text("top")
    (src / "a" / "b" / "deep.bin").write_bytes(bytes(range(256)) * 40)
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "x.pyc").write_bytes(b"skip me")
    r = cluster.remotes["ctl"]
    r.put(str(src), "/tmp/tree")
    assert r.run(["find", "/tmp/tree", "-name", "*.pyc"]).stdout == ""
    r.get("/tmp/tree", str(tmp_path / "back"))
    assert (tmp_path / "back" / "top.txt").read_text() == "top"
    assert (tmp_path / "back" / "a" / "b" / "deep.bin").read_bytes() == bytes(range(256)) * 40
    with pytest.raises(FileNotFoundError):
        r.get("/tmp/tree/missing", str(tmp_path / "missing"))


def test_replica_code_runs_on_the_hosts(cluster):
    code = cluster.layout.code_dir
    for r in cluster.remotes.values():
        out = r.run(["env", f"PYTHONPATH={code}", "python3", "-c",
                     "import replica.wire, replica.storage; print(replica.wire.__file__)"])
        assert out.stdout.strip().startswith(code + "/replica/")


def _can_connect(remote, address: str) -> bool:
    probe = f"import socket; socket.create_connection(('{address}', 22), timeout=1.5).close()"
    return remote.run(["python3", "-c", probe], check=False).returncode == 0


def test_iptables_partition_inside_containers(cluster):
    n1, n2, n3 = (cluster.remotes[n] for n in ("n1", "n2", "n3"))
    assert _can_connect(n1, n2.address)
    n2.run(["iptables", "-w", "-A", "INPUT", "-s", n1.address, "-j", "DROP"])
    try:
        assert not _can_connect(n1, n2.address)
        assert _can_connect(n3, n2.address)
        assert n2.run(["true"]).returncode == 0  # the harness still reaches n2
    finally:
        n2.run(["iptables", "-w", "-D", "INPUT", "-s", n1.address, "-j", "DROP"])
    assert _can_connect(n1, n2.address)


def test_run_returns_when_a_background_child_keeps_output_open(cluster):
    r = cluster.remotes["ctl"]
    done = r.run(["sh", "-c", "echo started; sleep 600 & exit 4"], check=False, timeout=10)
    assert (done.returncode, done.stdout) == (4, "started\n")
    r.run(["pkill", "-x", "sleep"], check=False)


def test_large_output_on_both_streams(cluster):
    r = cluster.remotes["ctl"]
    script = "import sys; sys.stdout.write('o' * 3_000_000); sys.stderr.write('e' * 3_000_000)"
    done = r.run(["python3", "-c", script])
    assert len(done.stdout) == 3_000_000 and len(done.stderr) == 3_000_000

"""The netns backend with plain processes: hosts reach each other over the
bridge, iptables grudges cut exactly the links they name, heal restores them,
and destroy leaves nothing behind."""
from __future__ import annotations

import sys
import time

import pytest

from harness.cleanup import RunRecord
from harness.cluster.base import Cluster, Remote
from harness.cluster.netns import NetnsCluster
from nemesis import grudges
from nemesis.network import Network
from hnetns_util import leftovers, needs_root, new_run_id, tcp_probe

pytestmark = [pytest.mark.root, needs_root, pytest.mark.timeout(120)]
PORT = 8765


@pytest.fixture
def cluster(tmp_path):
    run_id = new_run_id()
    rec = RunRecord(run_id, run_dir=tmp_path / "runs")
    c = NetnsCluster(run_id, 3, "10.211.7.0/24", rec, str(tmp_path / "work"))
    try:
        c.create()
        yield c
    finally:
        c.destroy()
        rec.remove_file()
    assert leftovers(run_id) == []


def serve(remote, tmp_path):
    remote.start_daemon("web", [sys.executable, "-m", "http.server", str(PORT), "--bind", remote.address],
                        str(tmp_path / f"{remote.name}.log"))
    for _ in range(100):
        if tcp_probe(remote, remote.address, PORT, timeout=0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"http.server on {remote.name} did not come up")


def test_hosts_satisfy_protocols(cluster):
    assert isinstance(cluster, Cluster)
    assert sorted(cluster.remotes) == ["ctl", "n1", "n2", "n3"]
    for r in cluster.remotes.values():
        assert isinstance(r, Remote)
        # each host sees only its own address on eth0
        out = r.run(["ip", "-o", "-4", "addr", "show", "dev", "eth0"]).stdout
        assert r.address in out


def test_partition_blocks_only_grudged_links(cluster, tmp_path):
    n1, n2, n3, ctl = (cluster.remotes[n] for n in ("n1", "n2", "n3", "ctl"))
    serve(n1, tmp_path)
    assert tcp_probe(n2, n1.address, PORT)
    net = Network(cluster.remotes)
    g = grudges.isolate(["ctl", "n1", "n2", "n3"], "n1")
    assert net.apply(g)["n1"] == ["ctl", "n2", "n3"]
    assert not tcp_probe(n2, n1.address, PORT)
    assert not tcp_probe(ctl, n1.address, PORT)
    # the client namespace is in no grudge: the workload still reaches n1
    assert tcp_probe(cluster.client_remote(), n1.address, PORT)
    net.heal()
    assert tcp_probe(n2, n1.address, PORT)
    assert tcp_probe(n3, n1.address, PORT)


def test_one_way_partition(cluster, tmp_path):
    n1, n2 = cluster.remotes["n1"], cluster.remotes["n2"]
    serve(n1, tmp_path)
    serve(n2, tmp_path)
    net = Network(cluster.remotes)
    net.apply(grudges.one_way(["ctl", "n1", "n2", "n3"], "n1"))  # n1 hears nobody
    assert not tcp_probe(n2, n1.address, PORT)  # SYN to n1 dropped
    # n1 -> n2: the SYN arrives but the SYN-ACK back to n1 is dropped
    assert not tcp_probe(n1, n2.address, PORT)
    net.heal()
    assert tcp_probe(n1, n2.address, PORT)


LATE_SERVER = """
import socket, sys, threading, time
def late(c):
    time.sleep(3)                  # the test cuts the link meanwhile
    try:
        c.sendall(b"late")         # written during the cut
        time.sleep(20)
    except OSError:
        pass
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen()
while True:
    threading.Thread(target=late, args=(s.accept()[0],), daemon=True).start()
"""
LATE_CLIENT = """
import os, socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
open(sys.argv[3] + ".up", "w").close()
c.settimeout(12)
try:
    out = "data:" + c.recv(16).decode()
except ConnectionResetError:
    out = "reset"
except socket.timeout:
    out = "timeout"
open(sys.argv[3] + ".part", "w").write(out)
os.replace(sys.argv[3] + ".part", sys.argv[3])   # the test never sees it half written
"""


def _wait_file(path, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_reject_partition_refuses_at_once_and_leaves_nothing_for_the_heal(cluster, tmp_path):
    """`reject`: a connect across the cut is refused at once (not a timeout), and what a
    host wrote during the cut is not delivered after the heal (its kernel saw the reset)."""
    n1, n2 = cluster.remotes["n1"], cluster.remotes["n2"]
    (tmp_path / "server.py").write_text(LATE_SERVER)
    (tmp_path / "client.py").write_text(LATE_CLIENT)
    n1.start_daemon("late", [sys.executable, str(tmp_path / "server.py"), n1.address, str(PORT)],
                    str(tmp_path / "server.log"))
    result = tmp_path / "result"
    for _ in range(100):   # the server listens
        if tcp_probe(cluster.client_remote(), n1.address, PORT, timeout=0.5):
            break
        time.sleep(0.1)
    n2.start_daemon("client", [sys.executable, str(tmp_path / "client.py"), n1.address, str(PORT), str(result)],
                    str(tmp_path / "client.log"))
    _wait_file(tmp_path / "result.up")
    g = grudges.isolate(["ctl", "n1", "n2", "n3"], "n1")
    g.graph["reject"] = True
    Network(cluster.remotes).apply(g)
    t0 = time.monotonic()
    code = (f"import socket\ntry: socket.create_connection(({n1.address!r}, {PORT}), timeout=5)\n"
            f"except Exception as e: print(type(e).__name__)")
    out = cluster.remotes["n3"].run([sys.executable, "-c", code], check=False, timeout=20).stdout
    assert out.strip() == "ConnectionRefusedError"   # refused (a reset), not a timeout
    time.sleep(max(0.0, 4.0 - (time.monotonic() - t0)))   # the server wrote "late" into the cut
    Network(cluster.remotes).heal()
    assert _wait_file(result, timeout=20).read_text() in ("timeout", "reset")


def test_signals_and_daemon_state(cluster, tmp_path):
    import signal
    n3 = cluster.remotes["n3"]
    serve(n3, tmp_path)
    assert n3.daemon_running("web")
    n3.signal("web", signal.SIGSTOP)
    assert n3.daemon_running("web")
    n3.signal("web", signal.SIGCONT)
    n3.signal("web", signal.SIGKILL)
    assert not n3.daemon_running("web")


def test_put_get_roundtrip(cluster, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("hello")
    n1 = cluster.remotes["n1"]
    n1.put(str(src), str(tmp_path / "remote-copy"))
    n1.get(str(tmp_path / "remote-copy" / "a.txt"), str(tmp_path / "back.txt"))
    assert (tmp_path / "back.txt").read_text() == "hello"


def test_two_runs_with_the_same_subnet_coexist(cluster, tmp_path):
    """The bridge has no address on the host, so a second run on the same
    subnet is invisible to the first."""
    run_id = new_run_id()
    rec = RunRecord(run_id, run_dir=tmp_path / "runs2")
    other = NetnsCluster(run_id, 3, cluster.subnet, rec, str(tmp_path / "work2"))
    try:
        other.create()
        serve(cluster.remotes["n1"], tmp_path)
        assert other.remotes["n1"].address == cluster.remotes["n1"].address
        assert tcp_probe(cluster.remotes["n2"], cluster.remotes["n1"].address, PORT)
        assert not tcp_probe(other.remotes["n2"], other.remotes["n1"].address, PORT)  # nothing serves there
    finally:
        other.destroy()
        rec.remove_file()
    assert leftovers(run_id) == []
    assert tcp_probe(cluster.remotes["n2"], cluster.remotes["n1"].address, PORT)

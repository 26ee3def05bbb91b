"""The packet fault on a real netns cluster: loss cuts a link, rate shapes
it, `between` touches only the chosen links, heal-packet removes every
qdisc and rule; delay, duplication and corruption work through netem or,
without it, through NFQUEUE and the shaper daemon."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from harness.cleanup import RunRecord, release
from harness.cluster.netns import NetnsCluster
from harness.sut import HostPlan
from nemesis.fault import FaultArgError, FaultEnv
from nemesis.packet import CHAIN, PACKET, SHAPER, netem_args, parse_start

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from hnetns_util import leftovers, needs_root, new_run_id, tcp_probe  # noqa: E402

pytestmark = pytest.mark.root

PORT = 7070
SERVER = f"import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); " \
         f"s.bind(('0.0.0.0', {PORT})); s.listen(64)\nwhile True: s.accept()[0].close()"


@pytest.fixture
def cluster(tmp_path):
    rid = new_run_id()
    record = RunRecord(rid, run_dir=tmp_path / "runs")
    c = NetnsCluster(rid, 2, "10.222.1.0/24", record, str(tmp_path / "work"))
    try:
        c.create()
        for n in ("n1", "n2", "ctl"):
            c.remotes[n].start_daemon("srv", [sys.executable, "-c", SERVER], str(tmp_path / f"{n}.log"))
        yield c
    finally:
        c.destroy()
        assert leftovers(rid) == []


def env_of(c) -> FaultEnv:
    return FaultEnv(db=types.SimpleNamespace(cluster=c), remotes=c.remotes,
                    plan=HostPlan(["n1", "n2"], {"controller": "ctl"}))


def reach(c, src: str, dst: str) -> bool:
    return tcp_probe(c.remotes[src], c.remotes[dst].address, PORT, timeout=1.0)


def qdiscs(c, host: str) -> str:
    return c.remotes[host].run(["tc", "qdisc", "show", "dev", "eth0"]).stdout


@needs_root
def test_loss_rate_between_and_heal(cluster):
    c = cluster
    fault = PACKET.make(env_of(c))
    rec = []
    assert reach(c, "n1", "n2") and reach(c, "ctl", "n2")
    # every link, total loss: nothing gets through
    value = fault.start(parse_start({"loss": 1.0}).resolve(lambda r: r, env_of(c).plan))
    assert value["scope"] == "all" and value["loss"] == 1.0
    assert not reach(c, "n1", "n2") and not reach(c, "ctl", "n1")
    fault.stop(None, None, lambda f, v: rec.append((f, v)))
    assert rec == [("heal-packet", None)]
    assert reach(c, "n1", "n2")
    assert shaper_left(c, fault, "n1") == [] and shaper_left(c, fault, "n2") == []
    # only between n1 and n2: the controller still reaches both
    fault.start(parse_start({"loss": 1.0, "between": ["n1", "n2"]}).resolve(lambda r: r, env_of(c).plan))
    assert not reach(c, "n1", "n2") and not reach(c, "n2", "n1")
    assert reach(c, "ctl", "n2") and reach(c, "ctl", "n1")
    fault.heal()
    assert reach(c, "n1", "n2")
    # rate: a shaping qdisc on the host's link, gone after heal
    fault.start(parse_start({"rate": "1mbit"}).resolve(lambda r: r, env_of(c).plan))
    shaped = qdiscs(c, "n1")
    assert ("tbf" in shaped or "netem" in shaped) and "rate 1Mbit" in shaped
    fault.heal()
    assert "tbf" not in qdiscs(c, "n1") and "netem" not in qdiscs(c, "n1")


PROBE = """
import json, os, socket, struct, sys, time
def csum(b):
    b += b"\\0" * (len(b) % 2)
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    return ~(s + (s >> 16)) & 0xFFFF
dst, count, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
ident = os.getpid() & 0xFFFF
rtts, replies = [], []
for seq in range(count):
    body = b"replog-probe-%04d" % seq + bytes(range(48))
    head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    s.sendto(struct.pack("!BBHHH", 8, 0, csum(head + body), ident, seq) + body, (dst, 0))
    t0, got, deadline = time.monotonic(), 0, time.monotonic() + wait
    while time.monotonic() < deadline:
        s.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            pkt = s.recv(2048)
        except socket.timeout:
            break
        icmp = pkt[(pkt[0] & 15) * 4:]
        kind, _, _, rid, rseq = struct.unpack_from("!BBHHH", icmp)
        if kind == 0 and rid == ident and rseq == seq:
            if not got:
                rtts.append((time.monotonic() - t0) * 1000)
                deadline = min(deadline, time.monotonic() + 0.05)  # duplicates follow at once
            got += 1
    replies.append(got)
print(json.dumps({"rtts": rtts, "replies": replies}))
"""


def ping(c, src: str, dst: str, count: int = 5, wait: float = 1.0) -> dict:
    """ICMP echo round trips from src to dst (a raw socket in src's namespace);
    each request waits up to `wait` seconds for its reply."""
    argv = [sys.executable, "-c", PROBE, c.remotes[dst].address, str(count), str(wait)]
    out = c.remotes[src].run(argv, timeout=30).stdout
    return json.loads(out)


def mean(xs):
    return sum(xs) / len(xs)


def csum_errors(c, host: str) -> int:
    """InCsumErrors of IP, ICMP, TCP and UDP in the host's namespace."""
    lines = c.remotes[host].run(["cat", "/proc/net/snmp"]).stdout.splitlines()
    total = 0
    for head, vals in zip(lines[::2], lines[1::2]):
        row = dict(zip(head.split()[1:], vals.split()[1:]))
        total += int(row.get("InCsumErrors", 0))
    return total


def running(pid: int) -> bool:
    """Alive and not a zombie (this test's process is the shapers' parent; a dead run's are reaped by init)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def shaper_left(c, fault, host: str) -> list[str]:
    """What the fault without netem leaves on a host: its chains' rules and the shaper daemon."""
    rules = c.remotes[host].run(["iptables", "-S"]).stdout
    left = [line for line in rules.splitlines() if CHAIN in line or "NFQUEUE" in line]
    return left + (["shaper running"] if c.remotes[host].daemon_running(SHAPER) else [])


@needs_root
def test_nfqueue_delay_duplicate_corrupt_and_heal(cluster):
    """Without netem (forced here, so a netem kernel tests this way too) the shaper
    daemon delays, duplicates and corrupts; heal restores the round trip and leaves
    no rule and no process."""
    c = cluster
    fault = PACKET.make(env_of(c))
    if not all(fault.nfqueue.values()):
        pytest.fail("this kernel has no nfnetlink_queue (CONFIG_NETFILTER_NETLINK_QUEUE)")
    fault.netem = dict.fromkeys(fault.netem, False)
    plan = env_of(c).plan
    base = ping(c, "n1", "n2")
    assert base["replies"] == [1] * 5
    # 50 ms (+-5) each way between n1 and n2: the round trip grows by ~100 ms
    value = fault.start(parse_start({"delay_ms": 50, "jitter_ms": 5, "between": ["n1", "n2"]})
                        .resolve(lambda r: r, plan))
    assert value["via"] == {"n1": "nfqueue", "n2": "nfqueue"}
    slow = ping(c, "n1", "n2")
    ctl = ping(c, "ctl", "n2", count=3)   # ctl -> n2 is not a chosen link: only n2's reply is delayed
    assert len(slow["rtts"]) == 5 and mean(slow["rtts"]) >= mean(base["rtts"]) + 80
    assert mean(ctl["rtts"]) < mean(slow["rtts"]) - 30
    fault.heal()
    healed = ping(c, "n1", "n2")
    assert healed["replies"] == [1] * 5 and mean(healed["rtts"]) <= mean(slow["rtts"]) - 80
    assert shaper_left(c, fault, "n1") == [] and shaper_left(c, fault, "n2") == []
    # every packet duplicated on every link: two or more replies per request
    fault.start(parse_start({"duplicate": 1.0}).resolve(lambda r: r, plan))
    dup = ping(c, "n1", "n2", count=3)
    fault.heal()
    assert len(dup["replies"]) == 3 and all(n >= 2 for n in dup["replies"]), dup
    # every packet corrupted: the receiver's checksums fail, no reply comes back
    before = csum_errors(c, "n2")
    fault.start(parse_start({"corrupt": 1.0}).resolve(lambda r: r, plan))
    bad = ping(c, "n1", "n2", count=3, wait=0.3)
    fault.heal()
    assert bad["replies"] == [0, 0, 0] and csum_errors(c, "n2") - before >= 3
    assert ping(c, "n1", "n2", count=2)["replies"] == [1, 1]
    for h in ("n1", "n2", "ctl"):
        assert shaper_left(c, fault, h) == []


@needs_root
def test_a_dead_runs_shapers_are_removed_by_cleanup(cluster):
    """A run killed while it delays: what `harness cleanup` does for it (release
    its record) leaves no shaper process."""
    c = cluster
    fault = PACKET.make(env_of(c))
    fault.netem = dict.fromkeys(fault.netem, False)
    fault.start(parse_start({"delay_ms": 50}).resolve(lambda r: r, env_of(c).plan))
    pids = [int(p.read_text()) for p in Path(c.layout.work_dir).glob(".packet-shaper-*.pid")]
    assert len(pids) == 3 and all(running(p) for p in pids)
    release(c.record)
    assert not any(running(p) for p in pids)


@needs_root
def test_delay_without_netem_or_nfqueue_is_refused_in_one_line(cluster):
    c = cluster
    fault = PACKET.make(env_of(c))
    target = parse_start({"delay_ms": 50, "jitter_ms": 10}).resolve(lambda r: r, env_of(c).plan)
    if all(fault.netem.values()):
        fault.start(target)
        assert "netem" in qdiscs(c, "n1") and "delay 50ms" in qdiscs(c, "n1")
        fault.heal()
        assert "netem" not in qdiscs(c, "n1")
    # a host with neither netem nor NFQUEUE (as a kernel without both would report)
    fault.netem = dict.fromkeys(fault.netem, False)
    fault.nfqueue = dict(fault.nfqueue, n2=False)
    with pytest.raises(FaultArgError) as e:
        fault.start(target)
    assert "neither netem" in str(e.value) and "n2" in str(e.value) and "\n" not in str(e.value)
    assert "netem" not in qdiscs(c, "n1") and shaper_left(c, fault, "n1") == []
    # the random schedule draws only what the hosts can do
    import random
    rng = random.Random(1)
    for _ in range(20):
        t = fault.choose(rng, types.SimpleNamespace(plan=env_of(c).plan, leader=None))
        assert set(t.detail) - {"scope"} <= {"loss", "rate"}


def test_netem_arguments_and_bad_steps():
    assert netem_args({"delay_ms": 50, "jitter_ms": 10, "loss": 0.2, "rate": "1mbit"}) == \
        ["delay", "50ms", "10ms", "distribution", "normal", "loss", "20%", "rate", "1mbit"]
    for arg, msg in (({}, "at least one"), ({"reorder": 0.1}, "needs delay_ms"), ({"loss": 2}, "loss"),
                     ({"loss": 0.1, "between": ["A"]}, "two or more"), ({"los": 0.1}, "unknown field")):
        with pytest.raises(FaultArgError) as e:
            parse_start(arg)
        assert msg in str(e.value) and "\n" not in str(e.value)

"""The packet fault on a real netns cluster: loss cuts a link, rate shapes
it, `between` touches only the chosen links, heal-packet removes every
qdisc and rule; delay and friends need the kernel's netem."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from harness.cleanup import RunRecord
from harness.cluster.netns import NetnsCluster
from harness.sut import HostPlan
from nemesis.fault import FaultArgError, FaultEnv
from nemesis.packet import CHAIN, PACKET, netem_args, parse_start

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from hnetns_util import leftovers, needs_root, new_run_id, tcp_probe  # noqa: E402

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
    assert "DROP" not in c.remotes["n1"].run(["iptables", "-S", CHAIN], check=False).stdout
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


@needs_root
def test_delay_needs_netem_and_is_refused_in_one_line_without_it(cluster):
    c = cluster
    fault = PACKET.make(env_of(c))
    target = parse_start({"delay_ms": 50, "jitter_ms": 10}).resolve(lambda r: r, env_of(c).plan)
    if all(fault.netem.values()):
        fault.start(target)
        assert "netem" in qdiscs(c, "n1") and "delay 50ms" in qdiscs(c, "n1")
        fault.heal()
        assert "netem" not in qdiscs(c, "n1")
    else:
        with pytest.raises(FaultArgError) as e:
            fault.start(target)
        assert "no netem" in str(e.value) and "\n" not in str(e.value)
        assert "netem" not in qdiscs(c, "n1")
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

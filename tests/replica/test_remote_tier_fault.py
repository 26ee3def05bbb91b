"""The remote-store fault's three modes on the replica's real object store
(replica.remote_store, its own process, HTTP on loopback), through the
adapter's RemoteTier (systems/replica/remote_tier.py) as the fault uses it:
unavailable makes every request fail at once and comes back whole, slow
makes each request wait, lose deletes one segment's objects and names the
offsets it held."""
from __future__ import annotations

import time

import pytest

from harness import registry
from harness.cleanup import RunRecord
from harness.remote.local import LocalRemote
from harness.spec import build_spec
from harness.sut import REMOTE_TIER, RemoteTier, RunShape, Unsupported, capabilities_of, require
from replica import protocol as P
from replica import storage as S
from replica.remote_store import StoreClient
from systems.replica.db import REPO_DIR, STORE_PORT

pytestmark = pytest.mark.root
SEGMENT = "log-0/00000000000000000003-3-5-b1e0n2"


def make_db(tmp_path, settings):
    system = registry.system("replica")
    spec = build_spec(system="replica", nodes=3, settings=settings)
    plan = system.host_plan(spec.nodes, spec.options(), spec.settings)
    cluster = registry.backend("netns").make_cluster(spec, "remote-tier", RunRecord("remote-tier", run_dir=tmp_path / "r"),
                                                     str(tmp_path / "work"), tuple(plan.roles.values()))
    for host in plan.hosts:
        cluster.remotes[host] = LocalRemote(host, "127.0.0.1")     # no namespaces: only the store runs
    shape = RunShape(nodes=3, keys=1, replication_factor=3, settings=spec.settings)
    return system.make_db(cluster, plan, shape, spec.options())


def stopped_fraction(pid: int, seconds: float) -> float:
    """How much of `seconds` the process spent stopped (SIGSTOP), sampled every 20 ms."""
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            samples.append(f.read().rsplit(")", 1)[1].split()[0] == "T")
        time.sleep(0.02)
    return sum(samples) / len(samples)


def test_a_run_without_tiered_storage_has_no_remote_tier(tmp_path):
    db = make_db(tmp_path, {})
    assert not capabilities_of(db).has(REMOTE_TIER) and db.remote_tier is None
    with pytest.raises(Unsupported, match="remote-tier.*tiered storage is off"):
        require(db, REMOTE_TIER, "fault remote-store")


def test_unavailable_slow_and_lost_objects_on_the_real_store(tmp_path):
    db = make_db(tmp_path, {"remote.storage.enable": True})
    tier = db.remote_tier
    assert isinstance(tier, RemoteTier)
    db.cluster.install_code(str(REPO_DIR), db.system.code)
    db.start(db.store)
    store = StoreClient(("127.0.0.1", STORE_PORT), timeout=5)
    try:
        deadline = time.monotonic() + 15
        while store.call({"api": P.LIST_OBJECTS, "corr": 0})["error"] and time.monotonic() < deadline:
            time.sleep(0.1)
        data = S.encode_records((3 + i, 0, 0, 100 + i) for i in range(3))
        for ext, body in ((".log", data), (".index", b"i"), (".leader-epoch-checkpoint", b"e")):
            assert store.call({"api": P.PUT_OBJECT, "corr": 0, "key": SEGMENT + ext, "data": body})["error"] is None
        assert tier.segments() == [{"key": 0, "base": 3, "name": SEGMENT + ".log", "topic": "log"}]

        assert tier.set_available(False)["available"] is False
        t = time.monotonic()
        assert store.call({"api": P.GET_OBJECT, "corr": 0, "key": SEGMENT + ".log"})["error"] == P.KAFKA_STORAGE_ERROR
        assert store.call({"api": P.PUT_OBJECT, "corr": 0, "key": "x", "data": b"x"})["error"] == P.KAFKA_STORAGE_ERROR
        assert time.monotonic() - t < 2                              # fails at once, no timeout
        assert [s["base"] for s in tier.segments()] == [3]           # the objects are still there, aside
        tier.set_available(True)
        assert store.get(SEGMENT + ".log") == data

        pid = db.cluster.remotes[db.store]._daemons[db.store].pid
        tier.set_delay(0.6)
        try:
            stopped = stopped_fraction(pid, 1.6)
            assert store.get(SEGMENT + ".log") == data          # slow, not failing
        finally:
            tier.set_delay(0)
        assert stopped > 0.3 and stopped_fraction(pid, 0.3) == 0

        lost = tier.lose(tier.segments()[0])
        assert (lost["key"], lost["base"], lost["end"]) == (0, 3, 5) and len(lost["objects"]) == 3
        assert store.call({"api": P.GET_OBJECT, "corr": 0, "key": SEGMENT + ".log"})["error"] == P.NOT_FOUND
        assert tier.segments() == []
    finally:
        db.teardown()

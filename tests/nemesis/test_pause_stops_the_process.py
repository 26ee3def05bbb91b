"""The pause fault stops the process it names, and only that one: the kernel
says so (/proc/<pid>/stat state T, "stopped", in every sample while paused)
and the broker stops answering; its stop (`resume`) makes the same process
run and answer again. Real replica processes (controller and three brokers,
each on its own loopback address), the registered fault, the adapter's
Pausable: nothing stands in."""
from __future__ import annotations

import asyncio
import random
import time

import pytest

from harness import registry
from harness.cleanup import RunRecord
from harness.remote.local import LocalRemote
from harness.spec import build_spec
from harness.sut import RunShape
from nemesis.fault import FaultEnv, Target

pytestmark = pytest.mark.root


def proc_state(pid: int) -> str:
    """The kernel's one-letter state of a process (R running, S sleeping, T stopped, ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def states_for(pid: int, seconds: float) -> list[str]:
    out, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        out.append(proc_state(pid))
        time.sleep(0.02)
    return out


def answers(db, node: str) -> bool:
    """Whether the node's broker answers a State request (the adapter's inspector, one per event loop)."""
    async def ask():
        inspector = type(db.inspector)(db)
        try:
            return await inspector.state(node, timeout=1.0)
        finally:
            await inspector.close()

    return asyncio.run(ask()) is not None


async def create_log(db) -> None:
    client = db.client()
    try:
        for _ in range(50):      # until the brokers have registered with the controller
            try:
                await client.create(1, 3, {})
                return
            except Exception:
                await asyncio.sleep(0.2)
        await client.create(1, 3, {})
    finally:
        await client.close()


def until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_a_pause_stops_the_process_it_names_and_its_stop_resumes_it(tmp_path):
    system = registry.system("replica")
    spec = build_spec(system="replica", nodes=3)
    plan = system.host_plan(spec.nodes, spec.options(), spec.settings)
    cluster = registry.backend("netns").make_cluster(spec, "pause", RunRecord("pause", run_dir=tmp_path / "r"),
                                                     str(tmp_path / "work"), tuple(plan.roles.values()))
    pids: dict[str, int] = {}
    for i, host in enumerate(plan.hosts, start=1):   # no namespaces: one loopback address per host
        cluster.remotes[host] = LocalRemote(host, f"127.77.0.{i}",
                                            on_start=lambda pid, _ns, h=host: pids.__setitem__(h, pid))
    shape = RunShape(nodes=3, keys=1, replication_factor=3, settings=spec.settings)
    db = system.make_db(cluster, plan, shape, spec.options())
    fault = registry.fault("pause").make(FaultEnv(db, cluster.remotes, plan))
    try:
        db.setup()
        asyncio.run(create_log(db))      # the brokers learn each other from the controller's push
        assert until(lambda: all(answers(db, n) for n in plan.nodes), 30), "the brokers never answered"
        victim, bystander = "n2", "n1"
        assert proc_state(pids[victim]) != "T"

        assert fault.start(Target([victim])) == [victim]
        assert until(lambda: proc_state(pids[victim]) == "T", 2)      # the signal is delivered...
        paused = states_for(pids[victim], 1.0)                        # ...and the process stays stopped
        assert paused and set(paused) == {"T"}, paused                # stopped in every sample
        assert "T" not in states_for(pids[bystander], 0.3)            # the fault named one process
        assert not answers(db, victim) and answers(db, bystander)

        recorded = []
        fault.stop(None, random.Random(0), lambda f, v: recorded.append((f, v)))
        assert recorded == [("resume", [victim])]
        assert until(lambda: proc_state(pids[victim]) != "T", 5), proc_state(pids[victim])
        assert db.running(victim) and until(lambda: answers(db, victim), 10)   # the same process runs again
        assert "T" not in states_for(pids[victim], 0.3)
    finally:
        fault.heal()
        db.teardown()

"""The log workload against a real one-broker cluster in network namespaces:
while the broker is down, sends fail definitely (nothing was sent) and the
process keeps its number; a send that may have been applied is `info` and
the process never invokes again; the final phase reads every key to its end.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from hnetns_util import in_client_thread, leftovers, needs_root, new_run_id  # noqa: E402

pytestmark = [pytest.mark.root, needs_root, pytest.mark.timeout(180)]

from harness import registry  # noqa: E402
from harness.cleanup import RunRecord  # noqa: E402
from harness.cluster.netns import NetnsCluster  # noqa: E402
from history.writer import HistoryWriter  # noqa: E402
from harness.sut import RunShape  # noqa: E402
from workloads.log import LogWorkload, WorkloadConfig  # noqa: E402


@contextmanager
def replica_workload(tmp_path, nodes: int, subnet: str, shape: RunShape, era: str, cfg: WorkloadConfig):
    """A real replica cluster on netns with a LogWorkload over it -> (db, history, wl,
    history path); torn down afterwards, and the run must leave nothing behind."""
    run_id = new_run_id()
    rec = RunRecord(run_id, run_dir=tmp_path / "runs")
    cluster = NetnsCluster(run_id, nodes, subnet, rec, str(tmp_path / "work"))
    hist_path = tmp_path / "history.jsonl"
    try:
        cluster.create()
        system = registry.system("replica")
        db = system.make_db(cluster, system.host_plan(nodes), shape, system.parse_options({"era": era}))
        db.setup()
        history = HistoryWriter(str(hist_path))
        yield db, history, LogWorkload(cfg, db, history), hist_path
        history.close()
        db.teardown()
    finally:
        cluster.destroy()
        rec.remove_file()
    assert leftovers(run_id) == []


def test_workload_semantics_across_a_crash(tmp_path):
    cfg = WorkloadConfig(keys=2, concurrency=4, rate=80, replication_factor=1, request_timeout=2.0, seed=1)
    shape = RunShape(1, 2, 1, {"min.insync.replicas": 1})
    with replica_workload(tmp_path, 1, "10.214.0.0/24", shape, "epoch", cfg) as (db, history, wl, hist_path):
        async def scenario():
            await wl.setup(timeout=60)
            start = time.monotonic()
            run = asyncio.create_task(wl.run(start + 8))
            await asyncio.sleep(2)
            await asyncio.to_thread(db.process.kill, "n1")
            history.nemesis("kill", ["n1"])
            await asyncio.sleep(3)
            await asyncio.to_thread(db.process.start, "n1")
            history.nemesis("start", ["n1"])
            await run
            history.nemesis("final", None)
            return await wl.final_reads(60)

        final = in_client_thread(db.cluster, scenario)
    assert final["healthy"] and final["complete"], final

    ops = [json.loads(l) for l in hist_path.read_text().splitlines()]
    kill_at = next(o["index"] for o in ops if o["f"] == "kill")
    start_at = next(o["index"] for o in ops if o["f"] == "start")
    down = [o for o in ops if kill_at < o["index"] < start_at and o["f"] == "send" and o["type"] != "invoke"]
    assert any(o["type"] == "fail" for o in down), "sends to a dead broker must fail definitely"
    info_processes = {o["process"] for o in ops if o["type"] == "info" and o["process"] != "nemesis"}
    for p in info_processes:
        last = max(o["index"] for o in ops if o["process"] == p)
        assert ops[last]["type"] == "info", f"process {p} was reused after info"
    assert max(o["process"] for o in ops if o["process"] != "nemesis") >= cfg.concurrency  # new process numbers
    # The final reads saw every acknowledged send.
    final_at = next(o["index"] for o in ops if o["f"] == "final")
    read = {v for o in ops[final_at:] if o["f"] == "poll" and o["type"] == "ok"
            for recs in o["value"].values() for _, v in recs}
    acked = {o["value"][1][1] for o in ops if o["f"] == "send" and o["type"] == "ok"}
    assert acked and acked <= read


def test_final_reads_wait_for_a_restarted_leaders_hw(tmp_path):
    """A leader killed and restarted at once keeps leading (the controller saw
    no session expire) with the HW it checkpointed at startup, far below its
    log end, until its followers fetch again (they back off 5 s after losing
    it). The final reads must wait for that HW instead of stopping at it, or
    acknowledged writes that every replica holds look lost."""
    settings = {"min.insync.replicas": 2, "replica.fetch.backoff.ms": 5000,
                "replica.high.watermark.checkpoint.interval.ms": 600000, "broker.session.timeout.ms": 20000}
    cfg = WorkloadConfig(keys=1, concurrency=1, replication_factor=3, request_timeout=3.0, seed=1)
    shape = RunShape(3, 1, 3, settings)
    with replica_workload(tmp_path, 3, "10.228.1.0/24", shape, "hw", cfg) as (db, history, wl, hist_path):
        async def scenario():
            await wl.setup(timeout=60)
            written = await wl.write(0, 6, "all")
            await wl.close()
            client = db.client(3.0)
            leader = (await client.metadata())[0].leader
            await client.close()
            await asyncio.to_thread(db.process.kill, leader)
            history.nemesis("kill", [leader])
            await asyncio.to_thread(db.process.start, leader)
            history.nemesis("start", [leader])
            lagging = None
            for _ in range(40):   # the restarted broker answers and leads again
                st = await db.inspector.state(leader)
                if st and st[0].role == "leader":
                    lagging = (st[0].hw, st[0].leo)
                    break
                await asyncio.sleep(0.1)
            history.nemesis("final", None)
            return written, lagging, await wl.final_reads(30)

        written, lagging, final = in_client_thread(db.cluster, scenario)
    assert lagging is not None and lagging[0] < lagging[1] == 6, f"the leader's (hw, leo) was {lagging}"
    ops = [json.loads(l) for l in hist_path.read_text().splitlines()]
    final_at = next(o["index"] for o in ops if o["f"] == "final")
    read = {v for o in ops[final_at:] if o["f"] == "poll" and o["type"] == "ok"
            for recs in o["value"].values() for _, v in recs}
    assert {w["value"] for w in written} <= read, (written, read)
    assert final["complete"] and final["keys"]["0"]["read_to"] == 6, final
    assert "hw == leo" in final["keys"]["0"]["why"]

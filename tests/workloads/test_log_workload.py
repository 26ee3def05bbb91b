"""The log workload against a real one-broker cluster in network namespaces:
while the broker is down, sends fail definitely (nothing was sent) and the
process keeps its number; a send that may have been applied is `info` and
the process never invokes again; the final phase reads every key to its end.
"""
from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from hnetns_util import leftovers, needs_root, new_run_id  # noqa: E402

pytestmark = [needs_root, pytest.mark.timeout(180)]

from harness import registry  # noqa: E402
from harness.cleanup import RunRecord  # noqa: E402
from harness.cluster.netns import NetnsCluster  # noqa: E402
from harness.history import HistoryWriter  # noqa: E402
from harness.sut import RunShape  # noqa: E402
from workloads.log import LogWorkload, WorkloadConfig  # noqa: E402


def in_client_thread(cluster, coro_fn):
    out = {}

    def main():
        try:
            cluster.enter_client_network()
            out["value"] = asyncio.run(coro_fn())
        except BaseException as e:  # re-raised in the test thread
            out["error"] = e

    t = threading.Thread(target=main)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_workload_semantics_across_a_crash(tmp_path):
    run_id = new_run_id()
    rec = RunRecord(run_id, run_dir=tmp_path / "runs")
    cluster = NetnsCluster(run_id, 1, "10.214.0.0/24", rec, str(tmp_path / "work"))
    hist_path = tmp_path / "history.jsonl"
    try:
        cluster.create()
        system = registry.system("replica")
        db = system.make_db(cluster, system.host_plan(1), RunShape(1, 2, 1, {"min.insync.replicas": 1}),
                            system.parse_options({"era": "epoch"}))
        db.setup()
        history = HistoryWriter(str(hist_path))
        cfg = WorkloadConfig(keys=2, concurrency=4, rate=80, replication_factor=1, request_timeout=2.0, seed=1)
        wl = LogWorkload(cfg, db, history)

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

        final = in_client_thread(cluster, scenario)
        history.close()
        db.teardown()
    finally:
        cluster.destroy()
        rec.remove_file()
    assert leftovers(run_id) == []
    assert final == {"healthy": True, "complete": True}

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

"""A log gone after acknowledged writes, on a real cluster: the workload's
scripted writes and its final phase, then `harness check` on the store.

`gone_run(cluster, db, store, remove)`: key 0 gets 20 acknowledged sends and
key 1 gets 5; `remove()` (a coroutine, run in the client namespace) takes the
log away the way the test says; then the nemesis "final" op and the
workload's final reads, timed. -> (final-reads summary, seconds they took)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from history.writer import HistoryWriter
from workloads.log import LogWorkload, WorkloadConfig

REPO = Path(__file__).resolve().parents[2]


def gone_run(cluster, db, store: Path, remove, system: str, recovery_timeout: float = 30.0):
    store.mkdir(parents=True, exist_ok=True)
    (store / "test.json").write_text(json.dumps({"system": system, "keys": 2}))
    history = HistoryWriter(str(store / "history.jsonl"))
    workload = LogWorkload(WorkloadConfig(keys=2, replication_factor=3, request_timeout=3.0), db, history)

    async def go():
        try:
            await workload.setup()
            await workload.write(0, 20, "all")
            await workload.write(1, 5, "all")
            await remove()
            history.nemesis("final", {"healed": True, "restarted": []})
            start = time.monotonic()
            final = await workload.final_reads(recovery_timeout)
            return final, time.monotonic() - start
        finally:
            await workload.close()

    try:
        return cluster.run(go) if hasattr(cluster, "run") else _in_client(cluster, go)
    finally:
        history.close()


def _in_client(cluster, go):
    from tests.harness.hnetns_util import in_client_thread
    return in_client_thread(cluster, go)


def harness_check(store: Path) -> tuple[int, dict, str]:
    """`harness check STORE` as a user runs it: (exit code, results.json, output)."""
    out = subprocess.run([sys.executable, "-m", "harness", "check", str(store)], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    results = json.loads((store / "results.json").read_text())
    return out.returncode, results, out.stdout + out.stderr

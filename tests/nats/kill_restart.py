"""The kill-and-restart schedule of the loss test, on a real cluster:
acknowledged writes to key 0, SIGKILL of every node that hosts key 0's
stream, restart, recovery, more writes, then final reads of every key to its
end. Every send and read is an op in a real history (history.writer), and
the verdict comes from the real checker (checkers.log_anomalies).

Also run by hand, N times over:  python -m tests.nats.kill_restart --runs 10
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from checkers.log_anomalies import check
from history.formats import read_history
from history.writer import HistoryWriter
from harness.sut import DefiniteError

KEY = 0


async def _send(client, history, process: int, value: int) -> str:
    op = history.invoke(process, "send", [KEY, value])
    try:
        offset = await client.send(KEY, value)
    except DefiniteError as e:
        history.complete(op, "fail", [KEY, value], error=str(e)[:200])
        return "fail"
    except Exception as e:
        history.complete(op, "info", [KEY, value], error=str(e)[:200])
        return "info"
    history.complete(op, "ok", [KEY, [offset, value]])
    return "ok"


async def _read_all(client, history, process: int, key: int) -> None:
    pos, end = 0, await client.end_offset(key)
    while True:
        op = history.invoke(process, "poll", None)
        recs = await client.poll(key, pos, 1000)
        history.complete(op, "ok", {str(key): [[o, v] for o, v in recs]})
        if not recs:
            return
        pos = recs[-1][0] + 1
        if pos >= end:
            end = await client.end_offset(key)
            if pos >= end:
                return


async def schedule(db, history, replicas: int, before: int = 20, after: int = 10) -> dict:
    """Returns what happened: the victims and the send outcomes."""
    from tests.nats.natsutil import until

    admin = db.client()
    try:
        await until(lambda: _create(admin, replicas), timeout=60)
        await until(lambda: _healthy(admin), timeout=60)
        info = await admin.stream_info(KEY)
        victims = sorted({info.cluster.leader, *(p.name for p in info.cluster.replicas or ())} - {None})
        outcomes = [await _send(admin, history, 0, v) for v in range(1, before + 1)]
        for n in victims:
            db.kill(n)
        history.nemesis("kill", victims)
        for n in victims:
            db.start(n)
            history.nemesis("start", [n])
        await until(lambda: _healthy(admin), timeout=60)
        reader = db.client()
        try:
            outcomes += [await _send(reader, history, 1, v) for v in range(before + 1, before + after + 1)]
            history.nemesis("final", {"healed": True, "restarted": []})
            await _read_all(reader, history, 2, KEY)
        finally:
            await reader.close()
        return {"victims": victims, "sends": {t: outcomes.count(t) for t in ("ok", "fail", "info")}}
    finally:
        await admin.close()


async def _create(client, replicas: int) -> bool:
    await client.create(1, replicas, {})
    return True


async def _healthy(client) -> bool:
    meta = await client.metadata()
    return KEY in meta and meta[KEY].leader is not None and set(meta[KEY].isr) >= set(meta[KEY].replicas)


def run_once(subnet: str, replicas: int, storage: str, work: Path) -> dict:
    """One fresh cluster, the schedule, the checker's verdict."""
    from tests.nats.natsutil import NatsCluster

    work.mkdir(parents=True, exist_ok=True)
    path = work / "history.jsonl"
    with NatsCluster(subnet, nodes=3, keys=1, tmp=work, storage=storage) as c:
        c.db.setup()
        history = HistoryWriter(str(path))
        try:
            what = c.run(schedule, c.db, history, replicas)
        finally:
            history.close()
            for n in c.db.nodes:
                c.db.collect(n, work / "nodes" / n)
    result = check(read_history(str(path)))
    return {**what, "valid": result["valid"], "counts": {k: v for k, v in result["counts"].items() if v},
            "examples": result["examples"], "history": str(path)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="the loss test's schedule, N times")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--storage", default="file", choices=("file", "memory"))
    p.add_argument("--subnet", default="10.221.30.0/24")
    args = p.parse_args(argv)
    tally = {}
    for i in range(args.runs):
        out = run_once(args.subnet, args.replicas, args.storage, Path(tempfile.mkdtemp(prefix="nats-kill-")))
        verdict = "valid" if out["valid"] is True else "invalid"
        tally[verdict] = tally.get(verdict, 0) + 1
        print(json.dumps({"run": i + 1, "valid": out["valid"], "victims": out["victims"], "sends": out["sends"],
                          "anomalies": out["counts"], "history": out["history"]}), flush=True)
    print(f"{args.runs} runs, replicas {args.replicas}, {args.storage} storage: {tally}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Acknowledged produces per second of Apache Kafka and NATS JetStream beside
the replica's acks=all produces, measured in the same run (a benchmark, not a
test).

Every system runs behind the same seam (harness.sut) on a 3-node netns
cluster (root needed) with 3 keys of 3 replicas: Kafka 4.1 (KRaft controller
on ctl) and the replica as a topic of 3 partitions with min.insync.replicas 2
and acks=all, NATS as 3 streams with file storage.
16 concurrent clients (one LogClient each, as workload processes have) send
one record per request to key (client index mod 3) for a fixed time.
Each round first runs the same load for --warmup seconds, not counted (the
JVM's code is interpreted and C1-compiled at first). Rounds alternate between
the systems so that the machine's noise hits all of them;
the figures to read are the ratios of the medians to the replica's (the
baseline measured in the same run).

    .venv/bin/python bench/acked_produces.py [--seconds 10] [--clients 16] [--rounds 3]
        [--subnet 10.221.200.0/24] [--systems kafka,nats,replica] [--warmup 10]

Prints one line per round and a closing JSON line with every figure.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import secrets
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness import registry  # noqa: E402
from harness.cleanup import RunRecord, release  # noqa: E402
from harness.cluster.netns import NetnsCluster  # noqa: E402
from harness.sut import RunShape  # noqa: E402

KEYS = 3
BASELINE = registry.DEFAULT_SYSTEM   # the others' throughput is reported as a ratio to it


async def _ready(db, timeout: float = 60.0) -> None:
    """Create the log and wait until every key has a leader and all replicas in sync."""
    admin = db.client(request_timeout=5.0)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                await admin.create(KEYS, 3, {})
                meta = await admin.metadata()
                if len(meta) >= KEYS and all(m.leader and len(m.isr) == 3 for m in meta.values()):
                    return
            except Exception as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{db.system.name} not ready: {e}") from None
            if problem := db.startup_problem():
                raise RuntimeError(problem)
            await asyncio.sleep(0.5)
    finally:
        await admin.close()


async def _measure(db, clients: int, seconds: float, warmup: float = 0.0) -> dict:
    values = itertools.count(1)
    conns = [db.client(request_timeout=10.0) for _ in range(clients)]
    acked = errors = 0
    latencies: list[float] = []
    for c in conns:  # connections opened outside the clock
        await c.end_offset(0)

    async def client(i: int, stop_at: float, counted: bool = True) -> None:
        nonlocal acked, errors
        while time.monotonic() < stop_at:
            t = time.monotonic()
            try:
                await conns[i].send(i % KEYS, next(values))
                if counted:
                    acked += 1
                    latencies.append(time.monotonic() - t)
            except Exception:
                errors += counted

    try:
        if warmup:   # the same load, not counted: a JVM runs interpreted and C1-compiled code at first
            end = time.monotonic() + warmup
            await asyncio.gather(*(client(i, end, counted=False) for i in range(clients)))
        start = time.monotonic()
        await asyncio.gather(*(client(i, start + seconds) for i in range(clients)))
        elapsed = time.monotonic() - start
    finally:
        await asyncio.gather(*(c.close() for c in conns))
    latencies.sort()
    pct = (lambda q: round(latencies[int(q * (len(latencies) - 1))] * 1000, 2)) if latencies else (lambda q: None)
    return {"acked": acked, "errors": errors, "seconds": round(elapsed, 2),
            "acked_per_s": round(acked / elapsed, 1), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "load_avg_1m": round(os.getloadavg()[0], 1)}


def one_round(name: str, args) -> dict:
    """A fresh 3-node cluster of one system, measured once, torn down."""
    system = registry.system(name)
    rid = secrets.token_hex(3)
    record = RunRecord(rid)
    record.save()
    cluster = NetnsCluster(rid, 3, args.subnet, record, f"/var/tmp/harness/{rid}")
    db = None
    result: dict = {}
    try:
        cluster.create()
        shape = RunShape(nodes=3, keys=KEYS, replication_factor=3, settings=system.default_settings(3))
        options = system.parse_options({})
        db = system.make_db(cluster, system.host_plan(3, options, shape.settings), shape, options)
        db.setup()

        def clients_thread():  # the client namespace is entered per thread
            try:
                cluster.enter_client_network()
                result.update(asyncio.run(_run(db, args)))
            except BaseException as e:
                result["error"] = f"{type(e).__name__}: {e}"

        t = threading.Thread(target=clients_thread)
        t.start()
        t.join()
    finally:
        if db is not None:
            db.teardown()
        cluster.destroy()
        release(record)
        record.remove_file()
    if "error" in result:
        raise SystemExit(f"{name}: {result['error']}")
    return result


async def _run(db, args) -> dict:
    await _ready(db)
    return await _measure(db, args.clients, args.seconds, args.warmup)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=10.0, help="seconds of the same load before the clock starts")
    p.add_argument("--subnet", default="10.221.200.0/24")
    p.add_argument("--systems", default=",".join(registry.names(registry.SYSTEMS)),
                   help=f"comma list; {BASELINE} (the baseline) is always measured")
    args = p.parse_args(argv)
    names = [n for n in registry.names(registry.SYSTEMS) if n in args.systems.split(",") or n == BASELINE]
    if os.geteuid() != 0:
        print("bench/acked_produces.py needs root (netns clusters); run it as root", file=sys.stderr)
        return 2
    rounds: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names:
            res = one_round(name, args)
            rounds[name].append(res)
            print(f"round {r + 1} {name:<8} {res['acked_per_s']:>8.1f} acked/s  p50 {res['p50_ms']} ms  "
                  f"p99 {res['p99_ms']} ms  errors {res['errors']}  load {res['load_avg_1m']}", flush=True)
    med = {n: statistics.median(x["acked_per_s"] for x in rs) for n, rs in rounds.items()}
    ratios = {n: round(med[n] / med[BASELINE], 2) if med[BASELINE] else None for n in names if n != BASELINE}
    print("median acked/s: " + ", ".join(f"{n} {v:.1f}" for n, v in med.items()) + "; "
          + ", ".join(f"{n}/{BASELINE} = {r}" for n, r in ratios.items()))
    print(json.dumps({"clients": args.clients, "seconds": args.seconds, "median_acked_per_s": med,
                      f"ratio_to_{BASELINE}": ratios, "rounds": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

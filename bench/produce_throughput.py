"""acks=all produce throughput of a local replica cluster (a benchmark, not a test).

Starts one controller and three brokers on 127.0.0.1 (the test fixture's
launcher, scaled-down timings), creates a topic with 3 partitions and
replication factor 3, and runs 16 concurrent producers (one Client each) for
a fixed time, first with one record per request, then with batches. Prints
records/s per mode and one JSON line with all figures.

    .venv/bin/python bench/produce_throughput.py [--seconds 10] [--producers 16] [--batch 100]
        [--era epoch] [--shared-too] [--set k=v] [--profile DIR]   # DIR: cProfile output of every process (*.prof)
        [--replica-root DIR]            # run the replica/ package found in DIR instead of this repo's
        [--compare DIR --rounds 3]      # alternate runs of this tree and of DIR/replica; print ratios

The machine is shared and noisy, so a change is judged by ``--compare``: it
runs this tree and a baseline copy (``cp -r replica /tmp/base/replica`` before
the change) in alternation, each in its own process, and reports the median
records/s and CPU microseconds per record of each, and their ratios per mode.

Reading the figures: besides records/s, each mode prints the CPU seconds of
every process, the kernel share of that CPU, and the seconds each process
spent runnable but waiting for a CPU (``/proc/PID/schedstat``). On the shared
2-core machine at load 8-12 the brokers wait ~70% of the wall time and run
~12%: throughput is (CPU share granted) / (CPU per record). One record per
request costs ~500 us of CPU per record over the four processes (client
included; 85% of it in user space), a batch of 100 ~30 us, so only batching
(or many more producers in flight, which batches follower fetches) reaches
thousands of records/s here.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _replica_root(argv: list[str]) -> Path:
    """``--replica-root DIR`` must be known before ``replica`` is imported (client and servers)."""
    for i, arg in enumerate(argv):
        if arg == "--replica-root" and i + 1 < len(argv):
            return Path(argv[i + 1]).resolve()
        if arg.startswith("--replica-root="):
            return Path(arg.split("=", 1)[1]).resolve()
    return REPO


ROOT = _replica_root(sys.argv[1:])
sys.path[:0] = [str(ROOT), str(REPO / "tests" / "replica")]

import cluster_fixture  # noqa: E402
from cluster_fixture import LocalCluster  # noqa: E402
from replica.client import ClientError  # noqa: E402

cluster_fixture.REPO = ROOT          # the processes run (cwd, PYTHONPATH) the same tree as the client

TOPIC = "bench"
PARTITIONS = 3
_TICK = os.sysconf("SC_CLK_TCK")


def runqueue_wait_seconds(cluster: LocalCluster) -> dict[str, float]:
    """Seconds each process spent runnable but waiting for a CPU (/proc/PID/schedstat, field 2).

    On a shared machine this, not the CPU time, is what bounds one-record requests."""
    out = {}
    for name, pid in [*((n, p.pid) for n, p in cluster.procs.items()), ("clients", os.getpid())]:
        try:
            out[name] = int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            out[name] = float("nan")
    return out


def cpu_seconds(cluster: LocalCluster, kernel_only: bool = False) -> dict[str, float]:
    """User+system (or only system) CPU seconds used so far by each cluster process and by this (client) process."""
    out = {}
    for name, proc in cluster.procs.items():
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[name] = ((0 if kernel_only else int(fields[11])) + int(fields[12])) / _TICK
        except (OSError, IndexError, ValueError):
            out[name] = float("nan")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["clients"] = (0 if kernel_only else usage.ru_utime) + usage.ru_stime
    return out


async def run_mode(cluster: LocalCluster, producers: int, seconds: float, batch: int, counter,
                   shared_client: bool = False) -> dict:
    """Each producer sends to partition (its index mod 3) until time is up; returns the figures.

    Producers have a Client each (as workload processes do), or share one
    (one pooled connection per broker) with ``shared_client``.
    """
    if shared_client:
        clients = [cluster.client(request_timeout=10.0)] * producers
    else:
        clients = [cluster.client(request_timeout=10.0) for _ in range(producers)]
    acked = errors = requests = 0
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds

    async def producer(i: int) -> None:
        nonlocal acked, errors, requests
        client, partition = clients[i], i % PARTITIONS
        while time.monotonic() < stop_at:
            values = [next(counter) for _ in range(batch)]
            started = time.monotonic()
            try:
                if batch == 1:
                    await client.produce(TOPIC, partition, values[0], acks="all")
                else:
                    await client.produce_many(TOPIC, partition, values, acks="all")
                acked += batch
                latencies.append(time.monotonic() - started)
            except ClientError:
                errors += 1
            requests += 1

    try:
        for client in set(clients):             # warm metadata and connections outside the clock
            await client.wait_for_leaders(TOPIC)
        cpu_before = cpu_seconds(cluster)
        sys_before = cpu_seconds(cluster, kernel_only=True)
        wait_before = runqueue_wait_seconds(cluster)
        started = time.monotonic()
        stop_at = started + seconds
        await asyncio.gather(*(producer(i) for i in range(producers)))
        elapsed = time.monotonic() - started
        cpu_after = cpu_seconds(cluster)
        sys_after = cpu_seconds(cluster, kernel_only=True)
        wait_after = runqueue_wait_seconds(cluster)
    finally:
        await asyncio.gather(*(c.close() for c in set(clients)))
    latencies.sort()
    pct = (lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 2)
           if latencies else None)
    return {"batch": batch, "records": acked, "requests": requests, "errors": errors,
            "seconds": round(elapsed, 2), "records_per_s": round(acked / elapsed, 1),
            "requests_per_s": round(requests / elapsed, 1), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "cpu_s": {k: round(cpu_after[k] - cpu_before[k], 2) for k in cpu_after},
            "cpu_us_per_record": round(sum(cpu_after[k] - cpu_before[k] for k in cpu_after)
                                       / max(acked, 1) * 1e6, 1),
            "kernel_cpu_share": round(sum(sys_after[k] - sys_before[k] for k in sys_after)
                                      / max(1e-9, sum(cpu_after[k] - cpu_before[k] for k in cpu_after)), 2),
            "runqueue_wait_s": {k: round(wait_after[k] - wait_before[k], 2) for k in wait_after},
            "load_avg_1m": os.getloadavg()[0]}


async def bench(args, cluster: LocalCluster) -> dict:
    admin = cluster.client()
    try:
        await cluster.wait_registered(admin)
        await admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                                 config={"min.insync.replicas": 2})
        await admin.wait_for_leaders(TOPIC)
    finally:
        await admin.close()
    counter = itertools.count()
    results = {}
    modes = [(1, False), (args.batch, False), (1, True), (args.batch, True)]
    for batch, shared in modes if args.shared_too else modes[:2]:
        name = f"batch={batch}" + (",shared-client" if shared else "")
        results[name] = r = await run_mode(cluster, args.producers, args.seconds, batch, counter, shared)
        print(f"{name:<24} {r['records_per_s']:>9.1f} records/s  {r['requests_per_s']:>8.1f} requests/s  "
              f"p50 {r['p50_ms']} ms  p99 {r['p99_ms']} ms  errors {r['errors']}  "
              f"cpu {r['cpu_us_per_record']} us/record ({r['kernel_cpu_share']:.0%} kernel) {r['cpu_s']}  "
              f"runqueue wait {r['runqueue_wait_s']}  load {r['load_avg_1m']:.1f}", flush=True)
    return results


def _strip(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """argv without the given options (each followed by its value)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not any(arg.startswith(n + "=") for n in names):
            out.append(arg)
    return out


def compare(args, argv: list[str]) -> int:
    """Run this tree and the baseline alternately in child processes; print medians and ratios."""
    import statistics
    import subprocess
    child = _strip(argv, ("--compare", "--rounds", "--replica-root", "--profile"))
    trees = {"baseline": args.compare.resolve(), "current": REPO}
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    cpu: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    for round_no in range(args.rounds):
        for name, root in trees.items():
            print(f"--- round {round_no + 1}/{args.rounds}: {name} ({root})", flush=True)
            done = subprocess.run([sys.executable, __file__, *child, "--replica-root", str(root)],
                                  stdout=subprocess.PIPE, text=True)
            lines = done.stdout.strip().splitlines()
            print("\n".join(lines[:-1]), flush=True)
            if done.returncode != 0 or not lines:
                print(f"{name} run failed (exit {done.returncode})", file=sys.stderr)
                return 2
            for mode, r in json.loads(lines[-1])["modes"].items():
                figures[name].setdefault(mode, []).append(r["records_per_s"])
                cpu[name].setdefault(mode, []).append(r["cpu_us_per_record"])
    summary = {}
    for mode in figures["current"]:
        base = statistics.median(figures["baseline"][mode])
        cur = statistics.median(figures["current"][mode])
        base_cpu = statistics.median(cpu["baseline"][mode])
        cur_cpu = statistics.median(cpu["current"][mode])
        summary[mode] = {"baseline": base, "current": cur, "ratio": round(cur / base, 2) if base else None,
                         "baseline_runs": figures["baseline"][mode], "current_runs": figures["current"][mode],
                         "cpu_us_per_record": {"baseline": base_cpu, "current": cur_cpu,
                                               "ratio": round(cur_cpu / base_cpu, 2) if base_cpu else None}}
        print(f"{mode:<24} baseline {base:>9.1f}  current {cur:>9.1f} records/s (median of {args.rounds})  "
              f"ratio {summary[mode]['ratio']}   cpu/record {base_cpu:.0f} -> {cur_cpu:.0f} us "
              f"(ratio {summary[mode]['cpu_us_per_record']['ratio']})")
    print(json.dumps({"producers": args.producers, "era": args.era, "compare": summary}))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--producers", type=int, default=16)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--era", default="epoch", choices=["hw", "kip101", "epoch"])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="broker/controller setting on top of the test fixture's fast timings")
    parser.add_argument("--shared-too", action="store_true",
                        help="also run both modes with one Client shared by all producers")
    parser.add_argument("--profile", type=Path, help="write cProfile output of every process here")
    parser.add_argument("--replica-root", type=Path, default=REPO,
                        help="folder that contains the replica/ package to benchmark")
    parser.add_argument("--compare", type=Path, metavar="DIR",
                        help="folder with a baseline replica/ package: alternate runs, print ratios")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree with --compare")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args, argv if argv is not None else sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="produce-bench-") as tmp:
        settings = dict(item.split("=", 1) for item in args.set)
        cluster = LocalCluster(Path(tmp), brokers=3, era=args.era, settings=settings, profile_dir=args.profile)
        try:
            cluster.start()
            results = asyncio.run(bench(args, cluster))
        finally:
            cluster.stop()
    print(json.dumps({"producers": args.producers, "era": args.era, "modes": results}))
    if args.profile:
        print(f"profiles in {args.profile}: python -m pstats {args.profile}/n1.prof", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

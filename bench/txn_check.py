"""The txn checker on synthetic transactional histories, both engines, beside same-run baselines.

    .venv/bin/python bench/txn_check.py --sizes 100000,1000000,10000000 [--local-max 1000000]
        [--dir bench/out/txn] [--inject 1] [--seed 0] [--scc] [--no-spark] [--no-log-baseline]

Per size (transactions): the history (`bench.engines.txn_synthetic`, every txn anomaly
injected `inject` times) is written to Parquet once (`txn_synthetic.write_tables`:
numpy arrays straight to Parquet, not timed as checking). Then
- Spark (`local[2]` unless CHECKERS_SPARK_MASTER; heap: CHECKERS_SPARK_DRIVER_MEMORY):
  the txn checker alone (`check_runs(names={"txn"})`), beside a baseline job that reads
  every column of every table of the run, and the log checker on the same tables;
- in-process (sizes <= --local-max): the txn checker on the flat rows loaded from those
  tables, beside the log checker on the same rows (the baseline), and whether its counts
  equal Spark's.
Every run's counts must show each injected kind exactly `inject` times.
--scc: also time the strongly-connected-components step alone with scipy, rustworkx
and networkx on the in-process graph of the largest local size (the choice in
checkers/txn/cycles.py). Prints one JSON object; the machine's load average is in it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.engines.measure import (delta, gib, jvm_cpu_seconds, jvm_peak_rss, python_peak_rss,  # noqa: E402
                                   read_everything, workers_cpu_seconds)
from bench.engines.synthetic import load_flat  # noqa: E402
from bench.engines.txn_synthetic import INJECTED, write_tables  # noqa: E402
from history.parquet import SCHEMAS  # noqa: E402


def prepare(run_dir: str, txns: int, inject: int, seed: int) -> float:
    """Write the run's Parquet tables once; -> seconds (0 when reused)."""
    done = os.path.join(run_dir, "done.json")
    if os.path.exists(done):
        return 0.0
    started = time.perf_counter()
    write_tables(run_dir, f"txns-{txns}", txns, seed=seed, inject=inject)
    seconds = time.perf_counter() - started
    Path(done).write_text(json.dumps({"txns": txns, "inject": inject, "seed": seed}))
    return seconds


def scc_times(sends, reads, ends) -> dict:
    """Seconds of the components step alone, per library, on the same graph."""
    import numpy as np

    from checkers.txn import cycles
    from checkers.txn.local import reduce

    graph = reduce(sends, reads, ends)
    n = len(graph.ids)
    src, dst, kind = cycles._all_edges(graph)
    total = n + int((kind == cycles.RT_OUT).sum())
    out = {"nodes": total, "edges": int(len(src))}
    started = time.perf_counter()
    labels = cycles._labels(total, src, dst, kind, tuple(range(6)))
    out["scipy_s"] = round(time.perf_counter() - started, 2)
    out["components"] = int(labels.max() + 1)
    try:
        import rustworkx

        started = time.perf_counter()
        g = rustworkx.PyDiGraph()
        g.add_nodes_from(range(total))
        g.add_edges_from_no_data(list(zip(src.tolist(), dst.tolist())))
        found = rustworkx.strongly_connected_components(g)
        out["rustworkx_s"] = round(time.perf_counter() - started, 2)
        out["rustworkx_components"] = len(found)
    except ImportError:
        out["rustworkx_s"] = "not installed"
    import networkx

    if total <= 2_000_000:
        started = time.perf_counter()
        g = networkx.DiGraph()
        g.add_nodes_from(range(total))
        g.add_edges_from(zip(src.tolist(), dst.tolist()))
        found = sum(1 for _ in networkx.strongly_connected_components(g))
        out["networkx_s"] = round(time.perf_counter() - started, 2)
        out["networkx_components"] = found
    del np
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--local-max", type=int, default=1_000_000)
    parser.add_argument("--dir", default=str(REPO / "bench" / "out" / "txn"))
    parser.add_argument("--inject", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scc", action="store_true")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--no-log-baseline", action="store_true",
                        help="Spark: the scan baseline only (the log checker at 10M costs as much as the txn check)")
    args = parser.parse_args()
    from checkers import log_anomalies
    from checkers.txn_anomalies import check_flat

    sizes = sorted(int(x) for x in args.sizes.split(",") if x.strip())
    report = {"inject": args.inject, "seed": args.seed, "runs": [],
              "master": os.environ.get("CHECKERS_SPARK_MASTER", "local[2]"),
              "driver_memory": os.environ.get("CHECKERS_SPARK_DRIVER_MEMORY", "default")}
    for txns in sizes:
        run_dir = os.path.join(args.dir, f"txns-{txns}")
        entry = {"txns": txns, "prepare_s": round(prepare(run_dir, txns, args.inject, args.seed), 1)}
        print(f"prepared {txns:,}: {entry['prepare_s']} s", file=sys.stderr, flush=True)
        report["runs"].append(entry)
    expected = {kind: args.inject for kind in INJECTED}
    if not args.no_spark:
        from checkers.spark.engine import check_runs
        from checkers.spark.session import spark_session
        from checkers.spark.tables import read_table

        spark = spark_session()
        for entry in report["runs"]:
            run_dir, run = os.path.join(args.dir, f"txns-{entry['txns']}"), f"txns-{entry['txns']}"
            started, cpu = time.perf_counter(), jvm_cpu_seconds(spark)
            rows = sum(read_everything(read_table(spark, [run_dir], t)) for t in SCHEMAS)
            base_s, base_cpu = time.perf_counter() - started, delta(jvm_cpu_seconds(spark), cpu)
            started, cpu, py = time.perf_counter(), jvm_cpu_seconds(spark), time.process_time()
            workers = workers_cpu_seconds(spark)
            txn = check_runs([run_dir], [run], spark=spark, names={"txn"})[run]["txn"]
            txn_s, txn_cpu = time.perf_counter() - started, delta(jvm_cpu_seconds(spark), cpu)
            txn_py = time.process_time() - py
            txn_workers = delta(workers_cpu_seconds(spark), workers)
            log_s, log_cpu = float("nan"), None
            if not args.no_log_baseline:
                started, cpu = time.perf_counter(), jvm_cpu_seconds(spark)
                check_runs([run_dir], [run], spark=spark, names={"log"})
                log_s, log_cpu = time.perf_counter() - started, delta(jvm_cpu_seconds(spark), cpu)
            counts = {k: v for k, v in txn["counts"].items() if v}
            entry["spark"] = {"txn_s": round(txn_s, 1), "scan_baseline_s": round(base_s, 1),
                              "txn_jvm_cpu_s": txn_cpu, "txn_driver_python_cpu_s": round(txn_py, 1), "txn_workers_python_cpu_s": txn_workers,
                              "scan_jvm_cpu_s": base_cpu, "log_jvm_cpu_s": log_cpu,
                              "log_checker_s": round(log_s, 1), "ratio_to_scan": round(txn_s / base_s, 1),
                              "ratio_to_log": round(txn_s / log_s, 2), "rows": rows, "counts": counts,
                              "injected_found": counts == expected, "transactions": txn["transactions"],
                              "jvm_peak_gib": gib(jvm_peak_rss(spark)), "load_avg_1m": os.getloadavg()[0]}
            print(f"spark {entry['txns']:,}: {entry['spark']}", file=sys.stderr, flush=True)
    for entry in report["runs"]:
        if entry["txns"] > args.local_max:
            continue
        run_dir = os.path.join(args.dir, f"txns-{entry['txns']}")
        started = time.perf_counter()
        sends, reads, _records, _replicas, ends = load_flat(run_dir)
        load_s = time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        log_anomalies.check_flat(sends, reads, ends)
        log_s, log_cpu = time.perf_counter() - started, time.process_time() - cpu
        started, cpu = time.perf_counter(), time.process_time()
        txn = check_flat(sends, reads, ends)
        txn_s, txn_cpu = time.perf_counter() - started, time.process_time() - cpu
        counts = {k: v for k, v in txn["counts"].items() if v}
        entry["local"] = {"txn_s": round(txn_s, 1), "log_checker_s": round(log_s, 1), "load_s": round(load_s, 1),
                          "txn_cpu_s": round(txn_cpu, 1), "log_checker_cpu_s": round(log_cpu, 1),
                          "cpu_ratio_to_log": round(txn_cpu / log_cpu, 2),
                          "ratio_to_log": round(txn_s / log_s, 2), "counts": counts,
                          "injected_found": counts == expected,
                          "same_as_spark": ("spark" not in entry) or counts == entry["spark"]["counts"],
                          "python_peak_gib": gib(python_peak_rss()), "load_avg_1m": os.getloadavg()[0]}
        print(f"local {entry['txns']:,}: {entry['local']}", file=sys.stderr, flush=True)
        if args.scc and entry["txns"] == max(e["txns"] for e in report["runs"] if e["txns"] <= args.local_max):
            report["scc"] = scc_times(sends, reads, ends)
        del sends, reads, ends
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""`harness bench --from-jsonl`: a check from history.jsonl, each step beside a same-run baseline.

Why apart from `bench.engines.synthetic`: that one writes the Parquet tables directly
(no conversion, and a history whose calls never overlap); this one starts
from a realistic history.jsonl (`bench.engines.jsonl_history.generate_jsonl`:
concurrent clients, crashed sends, nemesis ops) and times what `harness check
--engine spark` does with it:

- convert: history.jsonl -> Parquet through the store's entry point
  (`checkers.check_store.write_parquet`); baseline: reading the file line by line;
- check: `check_runs` whole; within it, log anomalies + replica diff (until
  both results are ready) and linearizability (its own `seconds`), which run
  side by side and so overlap; baseline: a Spark job reading every column of
  every table of the run;
- end to end: convert + check, against the sum of both baselines.

`ops` counts history lines, as results.json's stats.ops does (a client op is
two lines: invocation and completion).
"""

from __future__ import annotations

import os
import sys
import time

from bench.engines.measure import (delta, gib, profiled, task_profiles, jvm_cpu_seconds, jvm_java_version, jvm_peak_rss, python_peak_rss,
                                     read_everything)


def read_lines(path: str) -> int:
    """The convert step's baseline: every line of the file read, nothing parsed."""
    lines = 0
    with open(path, "rb") as handle:
        for _line in handle:
            lines += 1
    return lines


def _step(seconds: float, baseline: float, **more) -> dict:
    return {"seconds": round(seconds, 1), "baseline_s": round(baseline, 1),
            "ratio": round(seconds / baseline, 1) if baseline else None, **more}


def run_jsonl_bench(sizes, keys: int = 1000, out_dir: str = "bench/out",
                    master: str | None = None, inject: int = 1, seed: int = 0,
                    progress=None, profile: bool = True) -> list[dict]:
    """`run_from_jsonl` for each size, in one Spark session."""
    from checkers.spark.session import spark_session

    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    spark = spark_session(master)
    return [run_from_jsonl(spark, n, keys, out_dir, inject, seed, progress, profile) for n in sorted(sizes)]


def run_from_jsonl(spark, ops: int, keys: int, out_dir: str, inject: int, seed: int,
                   progress, profile: bool = True) -> dict:
    """Generate (or reuse) a history.jsonl of `ops` lines; time convert, check, end to end."""
    from bench.engines.jsonl_history import generate_jsonl
    from history.formats import iter_jsonl
    from history.parquet import SCHEMAS
    from checkers.spark.engine import check_runs
    from checkers.spark.tables import read_table
    from checkers.check_store import write_parquet

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"history-{ops}-{keys}-{inject}-{seed}.jsonl")
    if not os.path.exists(path):
        made = generate_jsonl(path + ".tmp", ops, keys=keys, inject=inject, seed=seed)
        os.replace(path + ".tmp", path)
        progress(f"wrote {path}: {made['ops']:,} lines in {made['seconds']:.1f}s")
    run, run_dir = f"jsonl-{ops}", os.path.join(out_dir, f"jsonl-{ops}")
    t0 = time.perf_counter()
    lines = read_lines(path)
    read_s = time.perf_counter() - t0
    profiles: dict = {}
    t0 = time.perf_counter()
    with profiled(profiles, "convert", profile):
        stats = write_parquet(run_dir, run, iter_jsonl(path), {})
    convert_s = time.perf_counter() - t0
    progress(f"converted {lines:,} lines in {convert_s:.1f}s (read alone {read_s:.1f}s)")
    t0 = time.perf_counter()
    for table in SCHEMAS:
        read_everything(read_table(spark, [run_dir], table))
    scan_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), jvm_cpu_seconds(spark)
    timings: dict = {}
    with profiled(profiles, "check_driver", profile):
        found = check_runs([run_dir], [run], spark=spark, timings=timings)[run]
    check_s, check_cpu = time.perf_counter() - t0, delta(jvm_cpu_seconds(spark), c0)
    with task_profiles(profiles, "check_tasks", profile):  # one more check, not timed
        if profile:
            check_runs([run_dir], [run], spark=spark)
    linear = found["linearizability"]
    report = {
        "lines": lines, "ops": stats["ops"], "keys": keys,
        "convert": _step(convert_s, read_s, ops_per_s=round(lines / convert_s)),
        "check": _step(check_s, scan_s),
        "anomalies_diff": _step(max(timings["checkers_s"][n] for n in ("log", "replica-diff")), scan_s),
        "linearizability": _step(linear["seconds"], scan_s, valid=linear["valid"],
                                 calls=linear["calls"], invalid_keys=linear.get("invalid_keys")),
        "end_to_end": _step(convert_s + check_s, read_s + scan_s),
        "check_jvm_cpu_s": check_cpu,
        "log_counts": {k: v for k, v in found["log"]["counts"].items() if v},
        "load_avg_1m": os.getloadavg()[0],
        "jvm_peak_gib": gib(jvm_peak_rss(spark)), "python_peak_gib": gib(python_peak_rss()),
        "java": jvm_java_version(spark),
        "profile_top": profiles,
    }
    progress(f"from history.jsonl, {lines:,} lines: {report}")
    return report

"""history.jsonl -> Parquet: ops/s and peak memory of the conversion, beside same-run baselines.

    .venv/bin/python bench/history_to_parquet.py --ops 10000000 [--dir bench/out] [--baseline-ops 1000000]

Writes (once, then reuses) a synthetic history of `ops` lines
(`bench.engines.jsonl_history.generate_jsonl`, 1000 keys), converts it the way
`harness check --engine spark` does (`parquet.write_run` over `iter_jsonl`,
block-wise) in a child process of its own (so its peak RSS is its own), and
in the same run measures a line count of the whole file (every line read,
nothing parsed: the floor of any conversion) and two baselines on the first `baseline-ops` lines of
the same file: the op-by-op reference conversion (orjson + Flattener, what
ran before) and a plain `for line in f: json.loads(line)` read; and, as the
option not taken, Arrow's multithreaded JSON reader parsing those lines
(every field but `value`, which has no one type: a lower bound on that way).
Prints one JSON object: wall and CPU seconds, ops/s, peak RSS, ratios, load
average.

The conversion runs `--repeat` times in its process: `seconds` is the first
(cold) run, `median_seconds` / `min_seconds` those of all runs; the imports
(pyarrow, and pandas, which pyarrow imports at its first `pa.array`: ~0.5 s
on an idle machine, a one-time cost of any process that converts) are timed
apart (`import_seconds`), and `thread_cpu_seconds` is one more conversion's CPU
per thread (the scan thread, the main thread's run bookkeeping, the Parquet
writers' threads): the profile of this path.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `bench.engines` when run as a script


def thread_cpu(convert) -> dict:
    """CPU seconds of each thread of one conversion: the scan thread, the main thread
    (the run bookkeeping, history.flatten_runs) and the Parquet writers' threads."""
    from history import jsonl_parquet, parquet

    spent = {"scan": 0.0, "parquet_writers": 0.0}
    scanned, write = jsonl_parquet.scanned_blocks, parquet.pq.ParquetWriter.write_table

    def timed_scan(*args, **kwargs):
        start = time.thread_time()
        yield from scanned(*args, **kwargs)
        spent["scan"] += time.thread_time() - start

    def timed_write(self, *args, **kwargs):
        start = time.thread_time()
        try:
            return write(self, *args, **kwargs)
        finally:
            spent["parquet_writers"] += time.thread_time() - start

    jsonl_parquet.scanned_blocks, parquet.pq.ParquetWriter.write_table = timed_scan, timed_write
    try:
        start = time.thread_time()
        convert()
        main = time.thread_time() - start
    finally:
        jsonl_parquet.scanned_blocks, parquet.pq.ParquetWriter.write_table = scanned, write
    return {"main": round(main, 2), **{k: round(v, 2) for k, v in spent.items()}}


def child(mode: str, path: str, out_dir: str, limit: int) -> dict:
    """One measurement, in this (child) process."""
    wall, cpu = time.perf_counter(), time.process_time()
    from history import jsonl_parquet, parquet  # noqa: F401 - timed apart: a one-time cost
    from history.formats import iter_jsonl
    imports = {"import_seconds": round(time.perf_counter() - wall, 2),
               "import_cpu_seconds": round(time.process_time() - cpu, 2)}

    if mode == "convert":  # `limit` times over (the first cold, the others warm)
        runs = []
        for _ in range(max(limit, 1)):
            shutil.rmtree(out_dir, ignore_errors=True)
            wall, cpu = time.perf_counter(), time.process_time()
            ops = parquet.write_run(out_dir, "bench", iter_jsonl(path), {})["ops"]
            runs.append((time.perf_counter() - wall, time.process_time() - cpu))
        walls = sorted(w for w, _ in runs)
        result = {"ops": ops, "seconds": round(runs[0][0], 2), "cpu_seconds": round(runs[0][1], 2),
                  "ops_per_s": round(ops / runs[0][0]), "runs": len(runs),
                  "wall_each": [round(w, 2) for w, _ in runs], "cpu_each": [round(c, 2) for _, c in runs],
                  "median_seconds": round(walls[len(walls) // 2], 2), "min_seconds": round(walls[0], 2),
                  "ops_per_s_at_median": round(ops / walls[len(walls) // 2]), **imports}
        shutil.rmtree(out_dir, ignore_errors=True)
        result["thread_cpu_seconds"] = thread_cpu(
            lambda: parquet.write_run(out_dir, "bench", iter_jsonl(path), {}))
        result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        return result
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "reference":
        reader = iter_jsonl(path)
        ops = parquet.write_run(out_dir, "bench", itertools.islice(iter(reader), limit), {})["ops"]
    elif mode == "arrow_json":  # Arrow's C++ JSON reader, the fields but value (it has no one type)
        import io

        import pyarrow as pa
        from pyarrow import json as arrow_json

        with open(path, "rb") as handle:
            data = b"".join(itertools.islice(handle, limit))
        schema = pa.schema([("index", pa.int64()), ("time", pa.int64()), ("type", pa.string()),
                            ("f", pa.string())])
        options = arrow_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        ops = arrow_json.read_json(io.BytesIO(data), parse_options=options).num_rows
    elif mode == "lines":  # every line read, nothing parsed (the whole file)
        ops = 0
        with open(path, "rb") as handle:
            for _line in handle:
                ops += 1
    else:  # json.loads of each line, nothing else
        ops = 0
        with open(path, "rb") as handle:
            for line in itertools.islice(handle, limit):
                json.loads(line)
                ops += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"ops": ops, "seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
            "ops_per_s": round(ops / wall),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def measure(mode: str, path: Path, out_dir: Path, limit: int) -> dict:
    shutil.rmtree(out_dir, ignore_errors=True)
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, __file__, "--child", mode, str(path), str(out_dir), str(limit)],
                          check=True, capture_output=True, text=True, cwd=REPO)
    result = json.loads(done.stdout.splitlines()[-1])
    return {**result, "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)]}


def history(out: Path, ops: int, keys: int) -> tuple[Path, dict | None]:
    from bench.engines.jsonl_history import generate_jsonl

    path = out / f"history-{ops}-{keys}.jsonl"
    if path.exists():
        return path, None
    out.mkdir(parents=True, exist_ok=True)
    return path, generate_jsonl(str(path), ops, keys=keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--baseline-ops", type=int, default=1_000_000)
    parser.add_argument("--dir", default=str(REPO / "bench" / "out"))
    parser.add_argument("--repeat", type=int, default=3,
                        help="conversions in the one process (the first cold, then warm: median and min)")
    parser.add_argument("--generate-only", action="store_true", help="write the history and stop")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, path, out_dir, limit = args.child
        print(json.dumps(child(mode, path, out_dir, int(limit))))
        return
    out = Path(args.dir)
    path, generated = history(out, args.ops, args.keys)
    report = {"history": str(path), "bytes": path.stat().st_size, "generated": generated}
    if args.generate_only:
        print(json.dumps(report, indent=1))
        return
    report["baseline_line_count"] = measure("lines", path, out / "none", 0)
    report["convert"] = measure("convert", path, out / "parquet", args.repeat)
    report["baseline_reference"] = measure("reference", path, out / "parquet-ref", args.baseline_ops)
    report["baseline_json_loads"] = measure("json", path, out / "none", args.baseline_ops)
    report["option_arrow_json_reader"] = measure("arrow_json", path, out / "none", args.baseline_ops)
    speed = report["convert"]["ops_per_s"]
    report["speedup_vs_reference"] = round(speed / report["baseline_reference"]["ops_per_s"], 2)
    report["speedup_vs_json_loads"] = round(speed / report["baseline_json_loads"]["ops_per_s"], 2)
    for unit in ("seconds", "cpu_seconds"):
        report[f"convert_to_line_count_{unit}"] = round(
            report["convert"][unit] / max(report["baseline_line_count"][unit], 0.01), 1)
    shutil.rmtree(out / "parquet-ref", ignore_errors=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

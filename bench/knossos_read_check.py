"""Read and check the whole Knossos corpus (tests/data/knossos) in one process.

    .venv/bin/python bench/knossos_read_check.py [--repeat 5]

Reports, per repetition, the time to read every file (`history.formats`,
the fast path for Jepsen's flat op maps) and to check it (WGL, the model of
tests/data/README.md), beside the same-run baseline: the same files read by
edn_format (`_read_edn_slow`), and the Python fast path alone (`_fast_edn`, what
read them before the C pass of history/native.c). Wall and CPU seconds, and the load average:
the machine is shared, and CPU seconds are what a quiet machine would take.

Each repetition reads every file once (`read_s`; the first is cold: modules,
buffers); then `--warm N` reads of the whole corpus in the same process give the
median and minimum (`read_median_s`, `read_min_s`, with the number of ops),
interleaved with the Python fast path's as the same-run baseline.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from history.formats import _fast_edn, _read_edn_slow, read_history
from checkers.linear import check_ops

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "knossos"


def model_for(path: Path) -> str:
    text = str(path)
    if "/cas-register/" in text:
        return "cas-register:0"
    if "/multi-register/" in text:
        return "multi-register:{:x 0 :y 0}"
    return "mutex"


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def once(files: list[Path]) -> dict:
    ops, read_wall, read_cpu = timed(lambda: [read_history(f) for f in files])
    _res, check_wall, check_cpu = timed(lambda: [check_ops(o, model_for(f)) for o, f in zip(ops, files)])
    base, base_wall, base_cpu = timed(lambda: [_read_edn_slow(str(f), f.read_text()) for f in files])
    _py, py_wall, py_cpu = timed(lambda: [_fast_edn(f.read_bytes()) for f in files])
    assert base == ops, "the fast path and edn_format disagree"
    return {"ops": sum(map(len, ops)), "files": len(files),
            "read_s": round(read_wall, 3), "check_s": round(check_wall, 3),
            "total_s": round(read_wall + check_wall, 3),
            "read_cpu_s": round(read_cpu, 3), "check_cpu_s": round(check_cpu, 3),
            "total_cpu_s": round(read_cpu + check_cpu, 3),
            "baseline_edn_format_read_s": round(base_wall, 3),
            "baseline_edn_format_read_cpu_s": round(base_cpu, 3),
            "read_speedup_cpu": round(base_cpu / read_cpu, 1),
            "python_fast_path_read_cpu_s": round(py_cpu, 3),
            "read_speedup_cpu_vs_python_fast_path": round(py_cpu / read_cpu, 1),
            "read_ops_per_s": round(sum(map(len, ops)) / read_wall),
            "read_ops_per_cpu_s": round(sum(map(len, ops)) / read_cpu),
            "load_avg_1m": round(os.getloadavg()[0], 1)}


def warm(files: list[Path], reads: int) -> dict:
    """The corpus read `reads` times over in this process (files in the page cache,
    the reader's modules and buffers warm): median and minimum, wall and CPU, beside
    the Python fast path read as many times in the same run (interleaved)."""
    ours, python = [], []
    for _ in range(reads):
        ops, wall, cpu = timed(lambda: [read_history(f) for f in files])
        ours.append((wall, cpu))
        _py, wall, cpu = timed(lambda: [_fast_edn(f.read_bytes()) for f in files])
        python.append((wall, cpu))
    count = sum(map(len, ops))

    def summary(runs, name):
        walls, cpus = sorted(w for w, _ in runs), sorted(c for _, c in runs)
        return {f"{name}_median_s": round(walls[len(walls) // 2], 4), f"{name}_min_s": round(walls[0], 4),
                f"{name}_median_cpu_s": round(cpus[len(cpus) // 2], 4), f"{name}_min_cpu_s": round(cpus[0], 4)}
    out = {"warm_reads": reads, "ops": count, **summary(ours, "read"), **summary(python, "python_fast_path")}
    out["read_ops_per_s_at_median"] = round(count / out["read_median_s"])
    out["load_avg_1m"] = round(os.getloadavg()[0], 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warm", type=int, default=15, help="warm reads of the corpus after the repeats")
    args = parser.parse_args()
    files = sorted(CORPUS.rglob("*.edn"))
    for _ in range(args.repeat):
        print(json.dumps(once(files)), flush=True)
    if args.warm:
        print(json.dumps(warm(files, args.warm)), flush=True)


if __name__ == "__main__":
    main()

"""The CLI as people run it by hand: `harness check-history` of one small EDN history,
`harness --help` and `harness --version`, each timed as a whole process, beside the
same-run baseline of a Python process that only starts (`python -c pass`).

    .venv/bin/python bench/cli_start.py [--repeat 5]

Prints one JSON object: per command the median wall and CPU (user + system)
seconds of `repeat` runs, their ratios to the baseline, the modules of the
heavy stacks each command imported (none expected: tests/harness/test_cli_imports.py),
and the load average (the machine is shared: CPU seconds are what a quiet
machine would take in wall time, give or take the start of the process).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EDN = REPO / "tests" / "data" / "knossos" / "cas-register" / "bad" / "bad-analysis.edn"
HEAVY = ("pyspark", "pandas", "matplotlib", "numpy", "pyarrow")


def timed(argv: list[str], cwd: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(args: list[str], cwd: str) -> list[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", *args], cwd=cwd,
                         capture_output=True, text=True, check=False)
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return sorted({n.split(".")[0] for n in names if n.split(".")[0] in HEAVY})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    harness = str(Path(sys.executable).with_name("harness"))
    with tempfile.TemporaryDirectory(prefix="cli-start-") as tmp:
        history = Path(tmp) / EDN.name
        shutil.copy(EDN, history)
        commands = {
            "baseline_python_start": [sys.executable, "-c", "pass"],
            "check_history_edn": [harness, "check-history", "--model", "cas-register:0", str(history)],
            "help": [harness, "--help"],
            "version": [harness, "--version"],
        }
        timed(commands["check_history_edn"], tmp)  # once untimed: jinja2's bytecode cache, the OS's file cache
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        load = os.getloadavg()[0]
        for _ in range(args.repeat):  # interleaved, so drift hits every command alike
            for name, argv in commands.items():
                runs[name].append(timed(argv, tmp))
        report: dict = {"repeat": args.repeat, "load_avg_1m": [round(load, 1), round(os.getloadavg()[0], 1)]}
        base_wall = statistics.median(w for w, _ in runs["baseline_python_start"])
        base_cpu = statistics.median(c for _, c in runs["baseline_python_start"])
        for name, samples in runs.items():
            wall = statistics.median(w for w, _ in samples)
            cpu = statistics.median(c for _, c in samples)
            report[name] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                            "wall_ratio": round(wall / base_wall, 1), "cpu_ratio": round(cpu / base_cpu, 1)}
        for name, cli_args in (("check_history_edn", commands["check_history_edn"][1:]),
                               ("help", ["--help"]), ("version", ["--version"])):
            report[name]["heavy_imports"] = heavy_imports(cli_args, tmp)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""Run every asserted cell of the scenario table N times in a row (not part
of the test suite: minutes of real clusters).

    harness repeat --runs 10 [--only hw-data-loss] [--store DIR]   (or python -m scenarios.repeat)

Each run is `harness scenario NAME --variant V --expect` in a subprocess; the
summary gives, per cell, how many runs gave the declared verdict and the
median wall time of a run, and per scenario the median over its variants. A JSON
summary goes to <store>/repeat-summary.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness.run_store import read_results
from scenarios.script import list_scenarios, load_scenario

REPO = Path(__file__).resolve().parents[1]


def cells(only: list[str] | None) -> list[tuple[str, str]]:
    out = []
    for name in list_scenarios():
        if only and name not in only:
            continue
        s = load_scenario(name)
        out += [(name, variant) for variant in s.variant_names() if variant in s.expect]
    return out


def run_once(name: str, variant: str, store: str, subnet: str) -> dict:
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness", "scenario", name, "--variant", variant, "--expect",
                           "--store", store, "--subnet", subnet],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO), CI="true"))
    wall = time.monotonic() - t
    lines = proc.stdout.strip().splitlines()
    run_dir = lines[-1] if lines else None
    sc = {}
    if run_dir:
        sc = (read_results(run_dir) or {}).get("scenario", {})
    err = [l for l in proc.stderr.splitlines() if "error" in l]
    return {"scenario": name, "variant": variant, "rc": proc.returncode, "wall_s": round(wall, 1), "store": run_dir,
            "verdict": sc.get("verdict"), "as_expected": sc.get("as_expected"),
            "measurements": {m["name"]: m["ms"] for m in sc.get("measurements", [])},
            "truncations_match": (sc.get("truncation_check") or {}).get("match"),
            "error": err[-1] if err else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", action="append")
    ap.add_argument("--store", default="store-repeat")
    ap.add_argument("--subnet", default="10.214.3.0/24")
    a = ap.parse_args(argv)
    results = []
    for name, variant in cells(a.only):
        for i in range(a.runs):
            r = run_once(name, variant, a.store, a.subnet)
            results.append(r)
            print(f"{name:<18} {variant:<7} run {i + 1:>2}: rc={r['rc']} {'ok ' if r['rc'] == 0 else 'BAD'} "
                  f"{r['wall_s']:5.1f}s verdict={r['verdict']} {r['measurements'] or ''} {r['error'] or ''}",
                  flush=True)
    summary = {}
    print("\nscenario           variant as expected  median s")
    for name, variant in cells(a.only):
        rs = [r for r in results if (r["scenario"], r["variant"]) == (name, variant)]
        ok = sum(r["rc"] == 0 for r in rs)
        med = statistics.median(r["wall_s"] for r in rs)
        summary[f"{name}/{variant}"] = {"as_expected": ok, "runs": len(rs), "median_s": med,
                                    "max_s": max(r["wall_s"] for r in rs)}
        print(f"{name:<18} {variant:<7} {ok:>2}/{len(rs):<2}        {med:6.1f}")
    for name in sorted({n for n, _ in cells(a.only)}):
        rs = [r for r in results if r["scenario"] == name]
        summary[name] = {"median_s": statistics.median(r["wall_s"] for r in rs)}
        print(f"{name:<18} all     median {summary[name]['median_s']:.1f} s")
    Path(a.store).mkdir(parents=True, exist_ok=True)
    (Path(a.store) / "repeat-summary.json").write_text(json.dumps({"summary": summary, "runs": results}, indent=1))
    return 0 if all(r["rc"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

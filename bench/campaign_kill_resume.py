"""Kill a campaign at random moments, resume it, and compare with the same
campaign run without interruption (by hand, not in the suite: ~10 min).

    .venv/bin/python bench/campaign_kill_resume.py --out /tmp/kr [--kills 2] [--seed 7]

The campaign: eras kip101 and epoch x nemesis sets {kill} and {partition} x
seeds 1, 2, 3 (12 runs of 10 s), --parallel 2. The killed one is SIGKILLed
`--kills` times at moments drawn from the seed and started again with
--resume each time. Prints, as JSON: the kill moments, for each run how
many attempts and run-end events it had, the partial attempts kept, and
whether every run's verdict and anomaly counts equal the uninterrupted
campaign's.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILE = """name: kill-resume
description: 2 eras x 2 nemesis sets x 3 seeds, for the kill/resume measurement
eras: [kip101, epoch]
nemesis: [[kill], [partition]]
seeds: [1, 2, 3]
time_limit: 10
nemesis_interval: 2
"""


def argv(file: Path, store: Path, subnets: str, *more: str) -> list[str]:
    return [sys.executable, "-m", "harness", "campaign", "run", str(file), "--store", str(store),
            "--parallel", "2", "--subnets", subnets, *more]


def env(tmp: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp / "records"),
                HARNESS_WORK_ROOT=str(tmp / "work"))


def folder(store: Path) -> Path:
    return sorted((store / "campaigns" / "kill-resume").iterdir())[-1]


def events(f: Path) -> list[dict]:
    return [json.loads(x) for x in (f / "events.jsonl").read_text().splitlines() if x.strip()]


def verdicts(f: Path) -> dict:
    s = json.loads((f / "summary.json").read_text())
    return {r["id"]: (r["verdict"], r["anomalies"]) for c in s["cells"] for r in c["runs"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    file = a.out / "kill-resume.yaml"
    file.write_text(FILE)
    e = env(a.out)
    t0 = time.monotonic()
    twin = subprocess.Popen(argv(file, a.out / "uninterrupted", "10.226.16.0/23"), env=e, cwd=a.out,
                            stdout=open(a.out / "uninterrupted.log", "w"), stderr=subprocess.STDOUT)
    kills, resumes = [], []
    cmd = argv(file, a.out / "killed", "10.226.18.0/23")
    for k in range(a.kills + 1):
        log = open(a.out / f"killed-{k}.log", "w")
        p = subprocess.Popen(cmd + (["--resume"] if k else []), env=e, cwd=a.out, stdout=log, stderr=subprocess.STDOUT)
        if k < a.kills:
            at = rng.uniform(5, 90)
            try:
                p.wait(at)
                print(f"campaign ended before kill {k + 1} at {at:.1f} s", file=sys.stderr)
                break
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()
                kills.append(round(at, 1))
        else:
            resumes.append(p.wait())
    twin_code = twin.wait()
    f, g = folder(a.out / "killed"), folder(a.out / "uninterrupted")
    evs = events(f)
    plan = json.loads((f / "plan.json").read_text())
    planned = [r["id"] for c in plan["cells"] for r in c["runs"]]
    per_run = {rid: {"run-start": sum(1 for x in evs if x.get("run") == rid and x["event"] == "run-start"),
                     "run-end": sum(1 for x in evs if x.get("run") == rid and x["event"] == "run-end"),
                     "partial": sum(1 for x in evs if x.get("run") == rid and x["event"] == "run-partial")}
               for rid in planned}
    marked = sorted(str(p.parent.relative_to(f)) for p in f.glob("runs/*/*/attempt-*/PARTIAL.json"))
    a_v, b_v = verdicts(f), verdicts(g)
    out = {"kill_moments_s": kills, "exit_resumed": resumes, "exit_uninterrupted": twin_code,
           "runs": len(planned), "every_run_ended_once": all(v["run-end"] == 1 for v in per_run.values()),
           "attempts_total": sum(v["run-start"] for v in per_run.values()), "partial_marked": marked,
           "same_results": a_v == b_v, "killed_verdicts": {k: v[0] for k, v in a_v.items()},
           "uninterrupted_verdicts": {k: v[0] for k, v in b_v.items()},
           "resumes": sum(1 for x in evs if x["event"] == "resume"), "wall_s": round(time.monotonic() - t0)}
    print(json.dumps(out, indent=2))
    return 0 if out["every_run_ended_once"] and out["same_results"] else 1


if __name__ == "__main__":
    sys.exit(main())

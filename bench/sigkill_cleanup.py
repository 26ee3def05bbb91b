"""SIGKILL runs at random moments and run `harness cleanup` at once; check that
nothing of them is left (issue 26, criterion 6). By hand, as root, not in the
suite: about 1 min per replica run, 2 per Kafka run.

    .venv/bin/python bench/sigkill_cleanup.py --out /tmp/sk [--runs 20] [--seed 1]
        [--systems A,B] [--subnet 10.245.40.0/24]

Run i draws (from --seed) a system, a fault set (power and packet among them,
where the system has them) and a kill moment 1-20 s after its history
appears; the harness is SIGKILLed and *not reaped* (so cleanup meets it while
it is still exiting or a zombie, the case that printed "0 resources
removed"), and `harness cleanup` runs at once with the run's own record
folder. Then: network namespaces, links, host iptables rules, processes
(brokers, JVMs, NATS servers, shaper and FUSE daemons) and FUSE mounts that
name the run id must be gone. Prints one JSON line per run and a summary;
exit 0 if nothing was left by any run, 1 otherwise, 2 if it could not run.
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
sys.path.insert(0, str(REPO))
# Faults a run draws from: power and packet (what leaves FUSE mounts, shapers and tc/iptables
# state behind) where the system supports them, and one or two of the process and network faults.
ALWAYS = ("power", "packet")
SOME = ("kill", "pause", "partition")


def draw_faults(rng: random.Random, system: str) -> list[str]:
    """A fault set for the system, from the faults its capabilities support."""
    from harness import registry

    supported = set(registry.faults_for(registry.system(system).capabilities_in()))
    others = [f for f in SOME if f in supported]
    return [f for f in ALWAYS if f in supported] + rng.sample(others, min(len(others), rng.randint(1, 2)))


def leftovers(run_id: str) -> list[str]:
    """Everything on this machine that still names the run."""
    def lines(*argv):
        out = subprocess.run(argv, capture_output=True, text=True).stdout
        return [l for l in out.splitlines() if run_id in l]
    found = [f"netns {l}" for l in lines("ip", "netns", "list")]
    found += [f"link {l.split(':')[1].strip()}" for l in lines("ip", "-o", "link", "show")]
    found += [f"rule {l}" for l in lines("iptables", "-S")]
    found += [f"mount {l.split()[1]}" for l in Path("/proc/mounts").read_text().splitlines() if run_id in l]
    me = os.getpid()
    for l in lines("ps", "-ww", "-eo", "pid,args"):
        pid = int(l.split()[0])
        if pid != me and "pid,args" not in l:
            found.append(f"process {l.strip()[:160]}")
    return found


def one(i: int, rng: random.Random, systems: list[str], out: Path, subnet: str) -> dict:
    system = rng.choice(systems)
    faults = draw_faults(rng, system)
    delay = rng.uniform(1, 20)
    tmp = out / f"run{i:02d}"
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), HARNESS_RUN_DIR=str(tmp / "runs"),
               HARNESS_WORK_ROOT=str(tmp / "work"))
    cmd = [sys.executable, "-m", "harness", "run", "--sut", system, "--nemesis", ",".join(faults),
           "--nemesis-interval", "3", "--time-limit", "90", "--seed", str(i + 1), "--subnet", subnet,
           "--store", str(tmp / "store"), "--rate", "40"]
    log = open(tmp / "harness.out", "w")
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
    row = {"run": i, "system": system, "faults": faults, "kill_after_s": round(delay, 1)}
    try:
        deadline = time.monotonic() + 300
        while not any((tmp / "store").glob("*/*/history.jsonl")):
            if proc.poll() is not None or time.monotonic() > deadline:
                row["error"] = f"the run did not get going (exit {proc.poll()}); see {tmp / 'harness.out'}"
                return row
            time.sleep(0.2)
        time.sleep(delay)
        store = next((tmp / "store").glob("*/*/history.jsonl")).parent
        run_id = json.loads((store / "test.json").read_text())["run_id"]
        row["run_id"] = run_id
        if proc.poll() is not None:
            row["error"] = "the run ended before it was killed"
            return row
        proc.send_signal(signal.SIGKILL)
        t = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "harness", "cleanup"], cwd=tmp, env=env,
                             capture_output=True, text=True, timeout=120)
        row["cleanup_s"] = round(time.monotonic() - t, 2)
        row["cleanup"] = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr.strip()[:200]
        row["waited"] = "waiting for it" in res.stdout
        row["left"] = leftovers(run_id)
        return row
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()
        if row.get("left") or "error" in row:  # measured; now leave the machine clean anyway
            subprocess.run([sys.executable, "-m", "harness", "cleanup"], cwd=tmp, env=env, capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--systems", default=None, help="comma list (default: every registered system)")
    ap.add_argument("--subnet", default="10.245.40.0/24")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("sigkill_cleanup: needs root (network namespaces)", file=sys.stderr)
        return 2
    from harness import registry

    known = registry.names(registry.SYSTEMS)
    systems = [s for s in (a.systems or ",".join(known)).split(",") if s]
    unknown = [s for s in systems if s not in known]
    if unknown:
        print(f"sigkill_cleanup: unknown system {unknown[0]!r}; use {', '.join(known)}", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    rows = []
    for i in range(a.runs):
        row = one(i, rng, systems, a.out, a.subnet)
        rows.append(row)
        print(json.dumps(row), flush=True)
    killed = [r for r in rows if "left" in r]
    dirty = [r for r in killed if r["left"]]
    print(json.dumps({"runs": len(rows), "killed_and_cleaned": len(killed), "left_something": len(dirty),
                      "cleanup_waited_for_the_harness": sum(r["waited"] for r in killed),
                      "not_killed": [r["run"] for r in rows if "left" not in r]}))
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())

"""Randomized schedule exploration of the replication protocol in the simulator.

Each schedule runs three replicas of one partition (acks=all,
min.insync.replicas=2, unclean election off) under a random sequence of steps:
produces, process crashes (written data survives, as with SIGKILL), restarts,
network partitions (both ways or one way), lossy links, heals and waits of random length (often 0-5 ms, so that
faults land inside protocol windows). After every step two invariants are
checked:

- no acknowledged record is lost: the live leader holds every acknowledged
  record, and every live replica whose HW is above an acknowledged offset holds
  that record there;
- replicas never disagree below the smallest HW of the live replicas.

A schedule is a list of JSON steps, so a failing one prints as a trace that
``replay`` runs again exactly. Run it as a module::

    python -m replica.sim.explore --era epoch --schedules 1000 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass, field

from .simulator import Simulator

TOPIC = "log"
BROKERS = [1, 2, 3]
CONFIG = {"min.insync.replicas": 2, "unclean.leader.election.enable": False}
GAPS = [0, 0, 1, 2, 3, 5, 10, 50, 200, 1000, 3000, 6000]
CHECKS = ("lost-write", "divergence")


@dataclass
class Outcome:
    era: str
    seed: int
    trace: list = field(default_factory=list)
    violation: dict | None = None
    acked: int = 0


def generate(rng: random.Random, steps: int, power_failures: bool = False) -> list:
    """A random schedule of ``steps`` steps (each a JSON-able list). With
    ``power_failures`` half the crashes also lose unflushed data."""
    trace, value, dead = [], 0, set()
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.40:
            trace.append(["produce", value])
            value += 1
        elif roll < 0.55:
            b = rng.choice(BROKERS)
            if b in dead:
                trace.append(["restart", b])
                dead.discard(b)
            else:
                trace.append(["crash", b, "power"] if power_failures and rng.random() < 0.5 else ["crash", b])
                dead.add(b)
        elif roll < 0.65 and dead:
            b = rng.choice(sorted(dead))
            trace.append(["restart", b])
            dead.discard(b)
        elif roll < 0.70:
            a, b = rng.sample(BROKERS + ["controller"], 2)
            trace.append(["partition", a, b])
        elif roll < 0.73:
            a, b = rng.sample(BROKERS + ["controller"], 2)
            trace.append(["cut", a, b])
        elif roll < 0.76:
            a, b = rng.sample(BROKERS + ["controller"], 2)
            trace.append(["drop", a, b, rng.choice([0.1, 0.5, 1.0])])
        elif roll < 0.82:
            trace.append(["heal"])
        trace.append(["wait", rng.choice(GAPS)])
    return trace


def check(sim: Simulator, checks=CHECKS) -> dict | None:
    """The invariants named in ``checks``; None when they hold."""
    live = [b for b in BROKERS if sim.alive(b) and sim.replica(b, TOPIC, 0) is not None]
    leader = sim.leader(TOPIC, 0)
    if "lost-write" in checks and leader in live:
        p = sim.replica(leader, TOPIC, 0)
        if p.role == "leader" and p.leader_epoch == sim.leader_epoch(TOPIC, 0):
            for _, _, offset, value in sim.acked:
                if offset >= p.leo or p.records[offset][3] != value:
                    return {"kind": "lost-write", "offset": offset, "value": value, "leader": leader,
                            "leader_log": [r[3] for r in p.records]}
    for b in live if "lost-write" in checks else []:
        p = sim.replica(b, TOPIC, 0)
        for _, _, offset, value in sim.acked:
            if offset < p.hw and p.records[offset][3] != value:
                return {"kind": "lost-write", "offset": offset, "value": value, "replica": b, "hw": p.hw,
                        "log": [r[3] for r in p.records]}
    if "divergence" in checks and len(live) > 1:
        low = min(sim.replica(b, TOPIC, 0).hw for b in live)
        logs = {b: [(r[1], r[3]) for r in sim.replica(b, TOPIC, 0).records[:low]] for b in live}
        first = logs[live[0]]
        for b in live[1:]:
            if logs[b] != first:
                offset = next(i for i, (x, y) in enumerate(zip(first, logs[b])) if x != y)
                return {"kind": "divergence", "below_hw": low, "offset": offset,
                        "replicas": {str(r): logs[r][offset] for r in live}}
    return None


def replay(trace: list, era: str, seed: int = 0, stop_at_violation: bool = True, unclean: bool = False,
           checks=CHECKS) -> Outcome:
    """Run a schedule, checking the invariants after every step, then heal,
    restart everything and check once more after recovery."""
    sim = Simulator(era, brokers=len(BROKERS), seed=seed,
                    config=dict(CONFIG, **{"unclean.leader.election.enable": unclean}))
    sim.create_topic(TOPIC, 1, len(BROKERS))
    outcome = Outcome(era, seed, trace)
    for index, step in enumerate(trace + [["final"]]):
        kind = step[0]
        if kind == "produce":
            sim.produce(TOPIC, 0, step[1], acks="all", timeout_ms=5000)
        elif kind == "crash":
            sim.crash(step[1], lose_unflushed=step[2:] == ["power"])
        elif kind == "restart":
            sim.restart(step[1])
        elif kind == "partition":
            sim.partition(step[1], step[2])
        elif kind == "cut":
            sim.cut(step[1], step[2])
        elif kind == "drop":
            sim.set_drop(step[1], step[2], step[3])
        elif kind == "heal":
            sim.heal()
        elif kind == "wait":
            sim.run_for(step[1])
        elif kind == "final":
            sim.heal()
            for b in BROKERS:
                sim.restart(b)
            sim.run_for(30000)
        else:
            raise ValueError(f"unknown step {step!r}")
        violation = check(sim, checks)
        if violation is not None:
            outcome.violation = dict(violation, step=index, at_ms=sim.now)
            if stop_at_violation:
                break
    outcome.acked = len(sim.acked)
    return outcome


def explore(era: str, schedules: int, seed: int, steps: int = 30, progress=None, unclean: bool = False,
            power_failures: bool = False, checks=CHECKS) -> tuple[int, list[Outcome]]:
    """Run ``schedules`` random schedules; returns (count run, failing outcomes)."""
    failures = []
    for i in range(schedules):
        schedule_seed = seed * 1_000_003 + i
        trace = generate(random.Random(schedule_seed), steps, power_failures)
        outcome = replay(trace, era, schedule_seed, unclean=unclean, checks=checks)
        if outcome.violation is not None:
            failures.append(outcome)
        if progress:
            progress(i + 1, outcome)
    return schedules, failures


def shrink(trace: list, era: str, seed: int, kind: str | None = None, **options) -> list:
    """Greedily drop steps while the schedule still violates an invariant (of the
    same kind), so that a failing trace reads as the few steps that matter."""
    def fails(candidate: list) -> bool:
        v = replay(candidate, era, seed, **options).violation
        return v is not None and (kind is None or v["kind"] == kind)

    current = list(trace)
    changed = True
    while changed:
        changed = False
        i = 0
        while i < len(current):
            candidate = current[:i] + current[i + 1:]
            if fails(candidate):
                current, changed = candidate, True
            else:
                i += 1
    return current


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replica.sim.explore", description=__doc__.split("\n")[0])
    parser.add_argument("--era", choices=["hw", "kip101", "epoch"], default="epoch")
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--replay", metavar="TRACE.json", help="replay one schedule instead of exploring")
    parser.add_argument("--unclean", action="store_true", help="enable unclean leader election")
    parser.add_argument("--power-failures", action="store_true", help="half the crashes lose unflushed data")
    parser.add_argument("--check", choices=["all", "divergence"], default="all",
                        help="divergence: only check that replicas agree below the HW (for runs that "
                             "legitimately lose acknowledged writes)")
    args = parser.parse_args(argv)
    options = {"unclean": args.unclean, "checks": CHECKS if args.check == "all" else ("divergence",)}
    if args.replay:
        try:
            with open(args.replay, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"error: cannot read trace {args.replay}: {e}", file=sys.stderr)
            return 2
        if not isinstance(data, dict) or not isinstance(data.get("trace"), list):
            print(f"error: {args.replay} must hold an object with a \"trace\" list (as explore prints it)",
                  file=sys.stderr)
            return 2
        options["unclean"] = options["unclean"] or bool(data.get("unclean"))
        try:
            outcome = replay(data["trace"], args.era, int(data.get("seed", 0)), **options)
        except (ValueError, TypeError, IndexError, KeyError) as e:
            print(f"error: bad step in {args.replay}: {e}", file=sys.stderr)
            return 2
        print(json.dumps({"era": args.era, "violation": outcome.violation}))
        return 1 if outcome.violation else 0
    started = time.monotonic()

    def progress(done: int, outcome: Outcome) -> None:
        if done % 100 == 0 or done == args.schedules:
            print(f"{done}/{args.schedules} schedules, {time.monotonic() - started:.1f}s", file=sys.stderr)

    count, failures = explore(args.era, args.schedules, args.seed, args.steps, progress,
                              power_failures=args.power_failures, **options)
    elapsed = time.monotonic() - started
    kinds: dict[str, int] = {}
    for f in failures:
        kinds[f.violation["kind"]] = kinds.get(f.violation["kind"], 0) + 1
    print(f"era {args.era}: {count} schedules in {elapsed:.1f}s, {len(failures)} with a violation"
          + (f" {kinds}" if kinds else ""))
    if failures:
        first = failures[0]
        short = shrink(first.trace, first.era, first.seed, first.violation["kind"], **options)
        again = replay(short, first.era, first.seed, **options)
        print("first failing schedule, shrunk (replay: save this JSON to a file and pass --replay FILE):")
        print(json.dumps({"era": first.era, "seed": first.seed, "unclean": args.unclean,
                          "violation": again.violation, "trace": short}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

With ``--tiered`` the partition tiers to the simulated remote store (segments
of three records, local retention 30 s, RLM and retention every 200 ms,
``min.insync.replicas`` 1 so that a lone leader keeps writing while the others
are away, which is when they fall below its local log start; session timeout 6 s
and lag time 5 s so that leaders change within a schedule). Its schedules are
random phases (``generate_phases``) whose targets are roles, and include
crashes of the store. The checks then read offsets below a
replica's local log start from the remote tier, which counts as one more copy.
``--skip-aux`` turns on ``remote.log.follower.skip.aux.state`` (the bug).
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
TIERED_CONFIG = {"min.insync.replicas": 1, "remote.storage.enable": True, "log.segment.bytes": 66,
                 "local.retention.ms": 30000, "remote.log.manager.task.interval.ms": 200,
                 "log.retention.check.interval.ms": 200, "replica.lag.time.max.ms": 5000,
                 "broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 1000}
SKIP_AUX = "remote.log.follower.skip.aux.state"
GAPS = [0, 0, 1, 2, 3, 5, 10, 50, 200, 1000, 3000, 6000]
CHECKS = ("lost-write", "divergence")


@dataclass
class Outcome:
    era: str
    seed: int
    trace: list = field(default_factory=list)
    violation: dict | None = None
    acked: int = 0
    resolved: list = field(default_factory=list)   # the trace with roles resolved to node ids


SHORT_WAITS = [200, 500, 1000, 2000]
LONG_WAITS = [12000, 20000, 40000]
CHECK_EVERY_MS = 1000


def generate_phases(rng: random.Random, phases: int) -> list:
    """A tiered schedule as a sequence of random phases, the harness nemesis's
    packages in small: maybe make the leader lag one follower (a one-way cut),
    a burst of writes, maybe crash the leader and/or a follower (or the store),
    a short or long wait (long: past the session timeout, so leaders change),
    maybe heal, maybe restart one or all crashed nodes, another wait. Targets
    are roles (``leader``, ``follower``, ``dead``) resolved when the step runs;
    ``r`` picks among several candidates."""
    trace, value = [], 0
    for _ in range(phases):
        if rng.random() < 0.5:
            trace.append(["lag", rng.randrange(6)])
        count = rng.choice([3, 6, 9])
        trace.append(["produce", value, count])
        value += count
        trace.append(["wait", rng.choice(SHORT_WAITS)])
        crash = rng.choice([None, "leader", "follower", "leader+follower", "store"])
        if crash in ("leader", "leader+follower"):
            trace.append(["crash", "leader"])
        if crash in ("follower", "leader+follower"):
            trace.append(["crash", "follower", rng.randrange(6)])
        if crash == "store":
            trace.append(["crash", "store"])
        trace.append(["wait", rng.choice(SHORT_WAITS + LONG_WAITS)])
        if rng.random() < 0.7:
            trace.append(["heal"])
        restart = rng.choice([None, "dead", "all"])
        if restart == "dead":
            trace.append(["restart", "dead", rng.randrange(6)])
        elif restart == "all":
            trace.append(["restart", "all"])
        trace.append(["wait", rng.choice(SHORT_WAITS + LONG_WAITS)])
    return trace


def resolve(sim: Simulator, step: list) -> list:
    """A step with its role targets replaced by node ids (``[]`` when no node fits)."""
    kind = step[0]
    leader = sim.leader(TOPIC, 0)
    leader = leader if leader is not None and sim.alive(leader) else None
    if kind == "lag":
        followers = [b for b in BROKERS if b != leader]
        return ["cut", leader, followers[step[1] % len(followers)]] if leader is not None else []
    if kind == "crash" and step[1] == "leader":
        return ["crash", leader] if leader is not None else []
    if kind == "crash" and step[1] == "follower":
        live = [b for b in BROKERS if b != leader and sim.alive(b)]
        return ["crash", live[step[2] % len(live)]] if live else []
    if kind == "restart" and step[1] == "dead":
        dead = [b for b in BROKERS + ["store"] if not sim.alive(b)]
        return ["restart", dead[step[2] % len(dead)]] if dead else []
    if kind == "restart" and step[1] == "all":
        return ["restart-all"]
    return step


def generate(rng: random.Random, steps: int, power_failures: bool = False, tiered: bool = False) -> list:
    """A random schedule of ``steps`` steps (each a JSON-able list). With
    ``power_failures`` half the crashes also lose unflushed data; with ``tiered``
    produces come in bursts and the store is a target too."""
    trace, value, dead = [], 0, set()
    nodes = BROKERS + ["store"] if tiered else BROKERS
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.40:
            if tiered and rng.random() < 0.5:
                count = rng.choice([3, 6, 9])
                trace.append(["produce", value, count])
                value += count
            else:
                trace.append(["produce", value])
                value += 1
        elif roll < 0.55:
            b = rng.choice(nodes)
            if b in dead:
                trace.append(["restart", b])
                dead.discard(b)
            else:
                trace.append(["crash", b, "power"] if power_failures and rng.random() < 0.5 else ["crash", b])
                dead.add(b)
        elif roll < 0.65 and dead:
            b = rng.choice(sorted(dead, key=str))
            trace.append(["restart", b])
            dead.discard(b)
        elif roll < 0.70:
            a, b = rng.sample(nodes + ["controller"], 2)
            trace.append(["partition", a, b])
        elif roll < 0.73:
            a, b = rng.sample(nodes + ["controller"], 2)
            trace.append(["cut", a, b])
        elif roll < 0.76:
            a, b = rng.sample(nodes + ["controller"], 2)
            trace.append(["drop", a, b, rng.choice([0.1, 0.5, 1.0])])
        elif roll < 0.82:
            trace.append(["heal"])
        trace.append(["wait", rng.choice(GAPS)])
    return trace


def check(sim: Simulator, checks=CHECKS) -> dict | None:
    """The invariants named in ``checks``; None when they hold. Offsets below a
    replica's local log start are looked up in the remote tier (one more copy)."""
    live = [b for b in BROKERS if sim.alive(b) and sim.replica(b, TOPIC, 0) is not None]
    leader = sim.leader(TOPIC, 0)
    remote = _remote(sim)

    def held(b: int, offset: int):
        r = sim.record_at(b, offset, TOPIC, 0)
        if r is None and offset < sim.replica(b, TOPIC, 0).local_start:
            r = remote.get(offset)
        return r

    if "lost-write" in checks and leader in live:
        p = sim.replica(leader, TOPIC, 0)
        if p.role == "leader" and p.leader_epoch == sim.leader_epoch(TOPIC, 0):
            for _, _, offset, value in sim.acked:
                r = held(leader, offset)
                if r is None or r[3] != value:
                    return {"kind": "lost-write", "offset": offset, "value": value, "leader": leader,
                            "leader_log": [x[3] for x in p.records], "local_start": p.local_start}
    for b in live if "lost-write" in checks else []:
        p = sim.replica(b, TOPIC, 0)
        for _, _, offset, value in sim.acked:
            r = held(b, offset) if offset < p.hw else None
            if r is not None and r[3] != value:
                return {"kind": "lost-write", "offset": offset, "value": value, "replica": b, "hw": p.hw,
                        "log": [x[3] for x in p.records], "local_start": p.local_start}
    if "divergence" in checks:
        copies = {str(b): sim.replica(b, TOPIC, 0) for b in live}
        low = min([p.hw for p in copies.values()], default=0)
        for offset in range(low):
            seen = {}
            for name, p in copies.items():
                r = sim.record_at(int(name), offset, TOPIC, 0)
                if r is not None:
                    seen[name] = (r[1], r[3])
            if offset in remote:
                seen["remote"] = (remote[offset][1], remote[offset][3])
            if len(set(seen.values())) > 1:
                return {"kind": "divergence", "below_hw": low, "offset": offset, "replicas": seen}
    return None


def _remote(sim: Simulator) -> dict:
    """The remote tier's records, decoded once per change of the metadata."""
    segments = sim.remote_segments(TOPIC, 0)
    key = tuple((s["id"], s["state"]) for s in segments)
    cached = getattr(sim, "_explore_remote", None)
    if cached is None or cached[0] != key:
        cached = (key, sim.remote_records(TOPIC, 0) if segments else {})
        sim._explore_remote = cached
    return cached[1]


def settings(unclean: bool = False, tiered: bool = False, skip_aux: bool = False) -> dict:
    """The replica settings of a schedule."""
    config = dict(CONFIG, **{"unclean.leader.election.enable": unclean})
    if tiered:
        config.update(TIERED_CONFIG)
    if skip_aux:
        config[SKIP_AUX] = True
    return config


def replay(trace: list, era: str, seed: int = 0, stop_at_violation: bool = True, unclean: bool = False,
           checks=CHECKS, tiered: bool = False, skip_aux: bool = False) -> Outcome:
    """Run a schedule, checking the invariants after every step, then heal,
    restart everything and check once more after recovery."""
    sim = Simulator(era, brokers=len(BROKERS), seed=seed, config=settings(unclean, tiered, skip_aux))
    sim.create_topic(TOPIC, 1, len(BROKERS))
    outcome = Outcome(era, seed, trace)
    for index, step in enumerate(trace + [["final"]]):
        step = resolve(sim, step)
        outcome.resolved.append(step)
        kind = step[0] if step else "skip"
        if kind == "skip":
            pass
        elif kind == "restart-all":
            for b in BROKERS + ["store"]:
                sim.restart(b)
        elif kind == "produce":
            count = step[2] if len(step) > 2 else 1
            for value in range(step[1], step[1] + count):
                sim.produce(TOPIC, 0, value, acks="all", timeout_ms=5000)
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
            left = step[1]
            while left > CHECK_EVERY_MS and check(sim, checks) is None:
                sim.run_for(CHECK_EVERY_MS)         # long waits are checked as they go
                left -= CHECK_EVERY_MS
            sim.run_for(left)
        elif kind == "final":
            sim.heal()
            for b in BROKERS + ["store"]:
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
            power_failures: bool = False, checks=CHECKS, tiered: bool = False,
            skip_aux: bool = False) -> tuple[int, list[Outcome]]:
    """Run ``schedules`` random schedules; returns (count run, failing outcomes)."""
    failures = []
    for i in range(schedules):
        schedule_seed = seed * 1_000_003 + i
        rng = random.Random(schedule_seed)
        trace = generate_phases(rng, max(1, steps // 4)) if tiered else generate(rng, steps, power_failures)
        outcome = replay(trace, era, schedule_seed, unclean=unclean, checks=checks, tiered=tiered,
                         skip_aux=skip_aux)
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
    parser.add_argument("--tiered", action="store_true",
                        help="tier to the simulated remote store (small segments, local retention 0)")
    parser.add_argument("--skip-aux", action="store_true",
                        help="set remote.log.follower.skip.aux.state (the deliberate tiered bug)")
    parser.add_argument("--emit-scenario", metavar="FILE",
                        help="write the first failing schedule (shrunk) as a scenario script for "
                             "`harness scenario --file FILE`")
    args = parser.parse_args(argv)
    options = {"unclean": args.unclean, "checks": CHECKS if args.check == "all" else ("divergence",),
               "tiered": args.tiered or args.skip_aux, "skip_aux": args.skip_aux}
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
        options["tiered"] = options["tiered"] or bool(data.get("tiered"))
        options["skip_aux"] = options["skip_aux"] or bool(data.get("skip_aux"))
        try:
            outcome = replay(data["trace"], args.era, int(data.get("seed", 0)), **options)
        except (ValueError, TypeError, IndexError, KeyError) as e:
            print(f"error: bad step in {args.replay}: {e}", file=sys.stderr)
            return 2
        print(json.dumps({"era": args.era, "violation": outcome.violation}))
        if args.emit_scenario and outcome.violation:
            from .emit import write_scenario
            write_scenario(args.emit_scenario,
                           {"era": args.era, "seed": int(data.get("seed", 0)), "violation": outcome.violation,
                            "skip_aux": options["skip_aux"], "resolved": outcome.resolved},
                           settings(options["unclean"], options["tiered"], options["skip_aux"]))
            print(f"scenario written to {args.emit_scenario}", file=sys.stderr)
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
        printed = {"era": first.era, "seed": first.seed, "unclean": args.unclean,
                   "tiered": options["tiered"], "skip_aux": options["skip_aux"],
                   "violation": again.violation, "trace": short}
        print(json.dumps(printed))
        printed["resolved"] = again.resolved
        if args.emit_scenario:
            from .emit import write_scenario
            write_scenario(args.emit_scenario, printed, settings(args.unclean, options["tiered"],
                                                                 options["skip_aux"]))
            print(f"scenario written to {args.emit_scenario}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

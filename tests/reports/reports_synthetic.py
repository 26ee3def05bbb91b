"""Synthetic run stores, so the report can be built and tested before real runs exist.

The generator plays a scripted `hw-data-loss`-like run: clients send and poll on a
few partitions while a nemesis kills, restarts and partitions nodes.  In the
``lossy`` variant (era ``hw``) the leader of partition 0 dies after acknowledging
two sends its follower never fetched; the follower is elected, reuses those
offsets, and the old leader keeps its divergent tail.  The store then holds what
a real run would: ``history.jsonl``, ``samples.jsonl``, ``nodes/<node>/dump.json``,
``test.json`` and a ``results.json`` whose examples point at real history indices.

Run ``python tests/reports/reports_synthetic.py ROOT --ops N`` to make one by hand.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import orjson

SECOND = 1_000_000_000
NODES = ["n1", "n2", "n3"]


@dataclass
class _Plan:
    """Times (ns) of the scripted nemesis actions, scaled to the run length."""

    duration: int
    kill_follower: int = 0
    restart_follower: int = 0
    kill_leader: int = 0
    restart_leader: int = 0
    partition: int = 0
    heal: int = 0
    final: int = 0

    def __post_init__(self) -> None:
        d = self.duration
        self.kill_follower, self.restart_follower = int(d * 0.20), int(d * 0.32)
        self.kill_leader, self.restart_leader = int(d * 0.45), int(d * 0.60)
        self.partition, self.heal = int(d * 0.66), int(d * 0.80)
        self.final = int(d * 0.92)


@dataclass
class _Event:
    time: int
    seq: int
    op: dict
    index: int = -1


@dataclass
class _Run:
    """Mutable state of the simulated cluster while the history is generated."""

    logs: dict[int, list[int]] = field(default_factory=dict)  # key -> values by offset
    lost: list[tuple[int, int]] = field(default_factory=list)  # (offset, value) lost on key 0
    truncated_at: int | None = None
    old_tail: list[int] = field(default_factory=list)  # n1's divergent records of key 0
    read_back: bool = False  # a poll has read key 0 past the truncation point


def make_store(
    root: str | os.PathLike,
    *,
    test: str = "hw-data-loss",
    era: str = "hw",
    lossy: bool = True,
    n_ops: int = 4000,
    processes: int = 5,
    partitions: int = 3,
    seconds: float = 20.0,
    start: str = "20261121T190000",
    seed: int = 1,
    evil_value: str | None = None,
) -> Path:
    """Write a store ``root/<test>/<start>/`` and return its path.

    ``n_ops`` counts history lines (invocations and completions).  ``evil_value``
    is sent as a record value early in the run (to test escaping).
    """
    rng = random.Random(seed)
    store = Path(root) / test / start
    (store / "nodes").mkdir(parents=True, exist_ok=True)
    plan = _Plan(int(seconds * SECOND))
    run = _Run(logs={k: [] for k in range(partitions)})
    events = _client_events(rng, plan, run, n_ops, processes, partitions, lossy, evil_value)
    events += _nemesis_events(plan)
    events.sort(key=lambda e: (e.time, e.seq))
    for i, ev in enumerate(events):
        ev.index = i
        ev.op["index"] = i
    _write_history(store / "history.jsonl", events)
    _write_samples(store / "samples.jsonl", rng, plan, run, partitions, lossy)
    _write_dumps(store / "nodes", run, partitions, lossy)
    _write_test(store / "test.json", test, era, n_ops, processes, partitions, seconds, start)
    _write_results(store / "results.json", events, run, lossy)
    (store / "harness.log").write_text("synthetic store\n")
    _link(store.parent / "latest", start)
    _link(Path(root) / "latest", f"{test}/{start}")
    return store


def _link(path: Path, target: str) -> None:
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)


def _client_events(rng, plan, run, n_ops, processes, partitions, lossy, evil_value):
    """Interleave sends and polls of concurrent processes; returns unsorted events."""
    pairs = max(1, n_ops // 2)
    mean_gap = plan.final * processes / pairs  # one op cycle of one process
    heap = [(int(rng.random() * mean_gap), p) for p in range(processes)]
    heapq.heapify(heap)
    events: list[_Event] = []
    next_value, seq = 0, 0
    acked_key0: list[tuple[int, int, _Event, _Event]] = []  # (offset, value, invoke, ok)
    for _ in range(pairs):
        t, proc = heapq.heappop(heap)
        latency = int(mean_gap * 0.35 * (1 + rng.expovariate(1.0)))
        outage = plan.kill_leader <= t < plan.kill_leader + SECOND // 2
        if lossy and run.truncated_at is None and t >= plan.kill_leader:
            _truncate(run, acked_key0)
        key = rng.randrange(partitions)
        read_back = (run.truncated_at is not None and not run.read_back
                     and len(run.logs[0]) >= run.truncated_at + len(run.old_tail))
        if read_back:  # a consumer reads the new records at the lost offsets
            key, run.read_back = 0, True
        if not read_back and rng.random() < 0.7:
            value = next_value
            next_value += 1
            if evil_value is not None and value == 3:
                value = evil_value
            inv = {"time": t, "process": proc, "type": "invoke", "f": "send", "value": [key, value]}
            if outage and key == 0:
                kind = "info" if rng.random() < 0.5 else "fail"
                done = {"time": t + latency * 20, "process": proc, "type": kind, "f": "send",
                        "value": [key, value],
                        "error": "REQUEST_TIMED_OUT" if kind == "info" else "NOT_ENOUGH_REPLICAS"}
            else:
                run.logs[key].append(value)
                offset = len(run.logs[key]) - 1
                done = {"time": t + latency, "process": proc, "type": "ok", "f": "send",
                        "value": [key, [offset, value]]}
        else:
            inv = {"time": t, "process": proc, "type": "invoke", "f": "poll", "value": None}
            log = run.logs[key]
            lo = max(0, len(log) - 4)
            done = {"time": t + latency, "process": proc, "type": "ok", "f": "poll",
                    "value": {str(key): [[o, log[o]] for o in range(lo, len(log))]}}
        e_inv, e_done = _Event(t, seq, inv), _Event(done["time"], seq + 1, done)
        seq += 2
        events += [e_inv, e_done]
        if done["f"] == "send" and done["type"] == "ok" and key == 0:
            acked_key0.append((done["value"][1][0], done["value"][1][1], e_inv, e_done))
        next_proc = proc + processes if done["type"] == "info" else proc
        heapq.heappush(heap, (max(done["time"], t + latency) + int(rng.random() * mean_gap * 0.6), next_proc))
    run.acked_key0 = acked_key0  # type: ignore[attr-defined]
    return events


def _truncate(run: _Run, acked_key0) -> None:
    """The new leader of key 0 never fetched the last two acknowledged sends."""
    log = run.logs[0]
    cut = max(0, len(log) - 2)
    run.truncated_at = cut
    run.old_tail = log[cut:]
    run.lost = [(o, v) for o, v, _, _ in acked_key0 if o >= cut]
    del log[cut:]


def _nemesis_events(plan: _Plan) -> list[_Event]:
    grudge = {"n1": ["n3"], "n2": [], "n3": ["n1"]}
    script = [
        (plan.kill_follower, "kill", ["n2"]),
        (plan.restart_follower, "start", ["n2"]),
        (plan.kill_leader, "kill", ["n1"]),
        (plan.restart_leader, "start", ["n1"]),
        (plan.partition, "partition", {"grudge": grudge}),
        (plan.heal, "heal", None),
        (plan.final, "final", None),
    ]
    events = []
    for i, (t, f, value) in enumerate(script):
        events.append(_Event(t, -2 * i - 2, {"time": t, "process": "nemesis", "type": "invoke", "f": f, "value": value}))
        events.append(_Event(t + SECOND // 20, -2 * i - 1,
                             {"time": t + SECOND // 20, "process": "nemesis", "type": "info", "f": f, "value": value}))
    return events


def _write_history(path: Path, events: list[_Event]) -> None:
    dumps = orjson.dumps
    with open(path, "wb") as out:
        out.write(b"\n".join(dumps(ev.op) for ev in events) + b"\n")


def _leader_of(key: int, t: int, plan: _Plan, lossy: bool) -> int:
    """Broker id leading partition ``key`` at time ``t`` in the script."""
    first = key % 3 + 1
    if first == 1 and t >= plan.kill_leader:
        return 2
    if first == 2 and plan.kill_follower <= t < plan.restart_follower:
        return 3
    return first


def _write_samples(path, rng, plan, run, partitions, lossy) -> None:
    step = max(plan.duration // 80, 1)
    final_len = {k: len(v) for k, v in run.logs.items()}
    with open(path, "w") as out:
        for t in range(0, plan.duration, step):
            frac = min(1.0, t / max(plan.final, 1))
            for node_id in (1, 2, 3):
                node = f"n{node_id}"
                if plan.kill_follower <= t < plan.restart_follower and node == "n2":
                    continue
                if plan.kill_leader <= t < plan.restart_leader and node == "n1":
                    continue
                parts = []
                for key in range(partitions):
                    leader = _leader_of(key, t, plan, lossy)
                    epoch = (2 if leader != key % 3 + 1 else 0) + (1 if t >= plan.restart_leader and key == 0 else 0)
                    leo = int(final_len[key] * frac)
                    isr = [b for b in (1, 2, 3) if not (
                        (b == 2 and plan.kill_follower + step <= t < plan.restart_follower + 2 * step)
                        or (b == 1 and plan.kill_leader + step <= t < plan.restart_leader + 2 * step))]
                    lag = 0 if node_id == leader else rng.randint(0, 2)
                    if node_id == 2 and plan.restart_follower <= t < plan.restart_follower + 2 * step:
                        lag = 6  # restarted follower truncated to its checkpointed HW
                    my_leo = max(0, leo - lag)
                    if lossy and key == 0 and node_id == 1 and t >= plan.restart_leader:
                        my_leo = leo + 2  # the stale tail of the old leader
                    parts.append({"topic": "log", "partition": key,
                                  "role": "leader" if node_id == leader else "follower",
                                  "leader": leader, "leader_epoch": epoch, "leo": my_leo,
                                  "hw": max(0, leo - 1), "log_start": 0, "isr": isr,
                                  "epoch_cache": [[0, 0]]})
                state = {"broker": node_id, "era": "hw", "partitions": parts}
                out.write(json.dumps({"time": t, "node": node, "state": state}) + "\n")


def _write_dumps(nodes_dir: Path, run: _Run, partitions: int, lossy: bool) -> None:
    for node_id, node in enumerate(NODES, start=1):
        parts = []
        for key in range(partitions):
            values = list(run.logs[key])
            epochs = [0] * len(values)
            if lossy and key == 0 and run.truncated_at is not None:
                cut = run.truncated_at
                epochs = [0] * cut + [2] * (len(values) - cut)
                if node == "n1":  # the old leader kept the records the others lost
                    values = values[:cut] + run.old_tail + values[cut + len(run.old_tail):]
                    epochs = [0] * (cut + len(run.old_tail)) + epochs[cut + len(run.old_tail):]
            records = [[o, epochs[o], _crc(v), v] for o, v in enumerate(values)]
            hw = max(0, len(values) - 1)
            parts.append({"topic": "log", "partition": key, "hw": hw, "leo": len(values),
                          "log_start": 0, "records": records})
        d = nodes_dir / node
        d.mkdir(parents=True, exist_ok=True)
        (d / "dump.json").write_bytes(orjson.dumps({"broker": node_id, "partitions": parts}))
        (d / "broker.log").write_text(f"broker {node_id} synthetic log\n")


def _crc(value) -> int:
    """The record CRC of the interfaces: crc32 of the value's JSON encoding."""
    return zlib.crc32(json.dumps(value).encode()) if isinstance(value, str) else zlib.crc32(b"%d" % value)


def _write_test(path, test, era, n_ops, processes, partitions, seconds, start) -> None:
    start_iso = f"{start[:4]}-{start[4:6]}-{start[6:8]}T{start[9:11]}:{start[11:13]}:{start[13:15]}Z"
    spec = {"name": test, "era": era, "nodes": NODES, "topic": "log", "partitions": partitions,
            "replication_factor": 3, "concurrency": processes, "time_limit": seconds,
            "nemesis": {"faults": ["kill", "partition"], "interval": 3},
            "workload": {"name": "kafka-log", "acks": "all", "ops": n_ops},
            "config": {"min.insync.replicas": 2, "unclean.leader.election.enable": False,
                       "replica.lag.time.max.ms": 10000},
            "backend": "netns", "start_time": start_iso}
    path.write_text(json.dumps(spec, indent=2))


def _write_results(path: Path, events: list[_Event], run: _Run, lossy: bool) -> None:
    oks = [e for e in events if e.op["type"] == "ok"]
    stats = {"ops": len(events),
             "ok": len(oks),
             "fail": sum(e.op["type"] == "fail" for e in events),
             "info": sum(e.op["type"] == "info" for e in events)}
    if not lossy or not run.lost:
        results = {"valid": True,
                   "checkers": {"log": {"valid": True, "counts": {}, "examples": {}},
                                "replica-diff": {"valid": True, "counts": {}, "examples": {}}},
                   "stats": stats}
        path.write_text(json.dumps(results, indent=2))
        return
    lost_ex, incons_ex = [], []
    acked = {(o, v): (i, d) for o, v, i, d in getattr(run, "acked_key0", [])}
    for offset, value in run.lost:
        e_inv, e_ok = acked[(offset, value)]
        reader = next((e for e in events if e.index > e_ok.index and e.op["f"] == "poll"
                       and e.op["type"] == "ok" and e.op["value"]
                       and any(o == offset and v != value for o, v in e.op["value"].get("0", []))), None)
        ops = [e_inv.index, e_ok.index] + ([reader.index] if reader else [])
        lost_ex.append({"key": 0, "offset": offset, "value": value, "ops": ops})
        if reader:
            other = dict((o, v) for o, v in reader.op["value"]["0"]).get(offset)
            if other is not None and other != value:
                incons_ex.append({"key": 0, "offset": offset, "values": [value, other],
                                  "ops": [e_ok.index, reader.index]})
    cut = run.truncated_at or 0
    divergent = [{"key": 0, "offset": cut + i,
                  "replicas": [["n1", 0, v], ["n2", 2, run.logs[0][cut + i]], ["n3", 2, run.logs[0][cut + i]]],
                  "ops": sorted(e_ok.index for (o, _), (_, e_ok) in acked.items() if o == cut + i)}
                 for i, v in enumerate(run.old_tail) if cut + i < len(run.logs[0])]
    results = {
        "valid": False,
        "checkers": {
            "log": {"valid": False,
                    "counts": {"lost-write": len(lost_ex), "inconsistent-offsets": len(incons_ex)},
                    "examples": {"lost-write": lost_ex, "inconsistent-offsets": incons_ex}},
            "replica-diff": {"valid": False, "counts": {"divergence": len(divergent)},
                             "examples": {"divergence": divergent},
                             "truncation-points": {"0": {"n2": cut, "n3": cut}}},
        },
        "stats": stats,
    }
    path.write_text(json.dumps(results, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--ops", type=int, default=4000)
    ap.add_argument("--era", default="hw")
    ap.add_argument("--valid", action="store_true")
    args = ap.parse_args()
    print(make_store(args.root, n_ops=args.ops, era=args.era, lossy=not args.valid))


if __name__ == "__main__":
    main()

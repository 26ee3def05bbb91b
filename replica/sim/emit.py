"""A simulated failing schedule as a scenario script (scenarios format),
so that ``harness scenario --file FILE --era ERA`` replays it on a real cluster.

The explorer's brokers 1, 2, 3 are the partition's replicas in assignment
order, so they are bound by role when the scenario starts (A = the leader of
key 0, B and C its followers 1 and 2); the store is the host ``store``, the
controller ``ctl``. Steps map one to one: ``produce`` -> ``write`` (expect
any: a write may time out; a burst is ``parallel``, all sends at once as the
simulator sends them), ``crash``/``restart`` -> ``kill``/``restart``,
``partition`` -> ``cut``, ``cut`` -> ``one-way``, ``heal``, ``wait`` ->
``sleep`` (the same milliseconds: the scenario carries the same settings, so
timeouts and elections take the same time). A lossy link (``drop``) has no
scripted equivalent and becomes a comment. Standard library only: the YAML is
written by hand (flat mappings and lists of scalars).
"""

from __future__ import annotations

import json

NAMES = {1: "A", 2: "B", 3: "C", "controller": "ctl", "store": "store"}
# Settings the real cluster needs besides the simulated ones: scaled-down fetch timings
# (the simulator has 1 ms links and no process start-up).
REAL_CLUSTER = {"replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 200,
                "replica.socket.timeout.ms": 2000, "controller.socket.timeout.ms": 2000,
                "request.timeout.ms": 5000}      # the explorer's produce timeout
SETTING_KEYS_SKIPPED = ()
SETTLE_MS = 3000


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value))


def steps_of(resolved: list) -> list[str]:
    """YAML lines (``  - ...``) of the resolved steps. A scenario's ``restart``
    kills a running node first, so only nodes the simulator had down restart."""
    out, down = [], set()
    for step in resolved:
        if not step:
            continue
        kind = step[0]
        name = lambda x: NAMES.get(x, str(x))  # noqa: E731
        if kind == "produce":
            count = step[2] if len(step) > 2 else 1
            burst = ", parallel: true" if count > 1 else ""     # the simulator sends a burst at once
            out.append(f"  - write: {{key: 0, count: {count}, expect: any{burst}}}")
        elif kind == "crash":
            if step[1] not in down:
                out.append(f"  - kill: {name(step[1])}")
            down.add(step[1])
        elif kind == "restart":
            if step[1] in down:
                out.append(f"  - restart: {name(step[1])}")
            down.discard(step[1])
        elif kind == "restart-all":
            if down:
                out.append(f"  - restart: [{', '.join(name(x) for x in sorted(down, key=str))}]")
            down.clear()
        elif kind == "partition":
            out.append(f"  - partition: {{cut: [{name(step[1])}, {name(step[2])}]}}")
        elif kind == "cut":
            out.append(f"  - partition: {{one-way: {{from: {name(step[1])}, to: {name(step[2])}}}}}")
        elif kind == "drop":
            out.append(f"  # drop {step[3]} of the messages {name(step[1])} -> {name(step[2])}: not scriptable")
        elif kind == "heal":
            out.append("  - heal:")
        elif kind == "wait":
            if step[1] > 0:
                out.append(f"  - sleep: {step[1] / 1000:g}")
        elif kind == "final":
            continue
        else:
            raise ValueError(f"no scenario step for {step!r}")
    return out


def scenario_text(failure: dict, settings: dict, name: str | None = None) -> str:
    """The scenario script of a failing schedule as printed by the explorer
    (``failure``: era, seed, violation, resolved) with the replica ``settings``."""
    era = failure["era"]
    violation = failure.get("violation") or {}
    kind = violation.get("kind", "lost-write")
    tiered = bool(settings.get("remote.storage.enable"))
    name = name or f"explored-{era}-{kind}-{failure.get('seed', 0)}"
    # A lost write on a replica that is not the leader is a divergence among the copies.
    anomaly = "lost-write" if kind == "lost-write" and "leader" in violation else "divergence"
    merged = dict(REAL_CLUSTER)
    merged.update(settings)
    lines = [
        f"name: {name}",
        f"source: \"python -m replica.sim.explore (era {era}, schedule seed {failure.get('seed')}"
        f"{', tiered' if tiered else ''}{', skip-aux' if failure.get('skip_aux') else ''}), "
        "emitted with --emit-scenario\"",
        "description: |",
        f"  A schedule the simulator found: {kind} ({json.dumps(violation, sort_keys=True)[:300]}).",
        "  Brokers 1, 2, 3 of the simulator are A (the first leader of key 0), B and C",
        "  (its followers 1 and 2 in assignment order); waits are sleeps of the same length.",
        "nodes: 3",
        "keys: 1",
        "replication_factor: 3",
        "acks: all",
    ]
    lines.append("settings:")
    lines += [f"  {k}: {_scalar(v)}" for k, v in sorted(merged.items()) if k not in SETTING_KEYS_SKIPPED]
    lines += [
        "# writes may time out (expect any); an unacknowledged write may or may not survive",
        "allowed_anomalies: [unseen]",
        "expect:",
        f"  {era}: {{valid: false, anomalies: [{anomaly}]}}",
    ]
    if era != "epoch":
        lines.append("  epoch: valid")
    lines += [
        "steps:",
        "  - bind: {A: leader of key 0, B: follower 1 of key 0, C: follower 2 of key 0}",
    ]
    lines += steps_of(failure["resolved"])
    # The simulator saw the violation at ``at_ms``; the final phase heals everything, so
    # give the cluster that long (plus a margin for process start-up) before it begins.
    slept = sum(step[1] for step in failure["resolved"] if step and step[0] == "wait")
    left = max(0, violation.get("at_ms", 0) - slept) + SETTLE_MS
    lines.append(f"  - sleep: {left / 1000:g}                  # until the simulator's violation, + margin")
    lines.append("  - write: {key: 0, count: 2, expect: any}   # later offsets: a loss shows as lost-write")
    return "\n".join(lines) + "\n"


def write_scenario(path: str, failure: dict, settings: dict, name: str | None = None) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(scenario_text(failure, settings, name))

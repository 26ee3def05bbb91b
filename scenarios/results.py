"""What a scenario run found, for results.json.

`findings()` gathers, once, what a person reviewing a scenario asks first:
which acknowledged writes the final reads did not return (`unread_acknowledged`:
key, offset, value, the op that acknowledged them; not the log checker's
`lost-write`, which needs a read that skipped the write), at which offsets which replicas diverge, where each
replica truncated its log (the system's log events, and LEO drops between
samples), ISR changes, and the measurements. `judge()` then turns the
checkers' results and those findings into the scenario's verdict: the
anomalies its configuration allows are set aside and the declared
expectation is compared. `judge` is pure, so `harness check` re-judges a
scenario store with fresh checker results and keeps its verdict.
"""
from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from checkers.vocabulary import ANOMALIES
from harness import run_store
from scenarios.script import Scenario


def unread_acknowledged(ops: list[dict], writes: list[dict]) -> list[dict] | None:
    """Acknowledged sends missing from the final reads of their key (None: no final phase)."""
    final_at = next((o["index"] for o in ops if o.get("process") == "nemesis" and o.get("f") == "final"), None)
    if final_at is None:
        return None
    final = defaultdict(dict)  # key -> offset -> value
    for o in ops:
        if o["index"] > final_at and o.get("f") == "poll" and o.get("type") == "ok" and o.get("value"):
            for key, pairs in o["value"].items():
                for offset, value in pairs:
                    final[int(key)][offset] = value
    acks = {(w["key"], w["value"]): w.get("acks") for w in writes}
    invokes = {}
    lost = []
    for o in ops:
        if o.get("f") != "send" or o.get("process") == "nemesis":
            continue
        if o["type"] == "invoke":
            invokes[o["process"]] = o["index"]
        elif o["type"] == "ok":
            key, (offset, value) = o["value"]
            if value not in final[key].values():
                lost.append({"key": key, "offset": offset, "value": value, "op": o["index"],
                             "invoke": invokes.get(o["process"]), "acks": acks.get((key, value)),
                             "now_at_offset": final[key].get(offset)})
    return lost


def divergence(dumps: dict[str, dict]) -> list[dict]:
    """Offsets at which replicas hold different records; `committed` when the
    offset is below the HW of every replica holding it."""
    by_key = defaultdict(lambda: defaultdict(dict))  # key -> offset -> node -> (epoch, value)
    hws = {}
    for node, dump in dumps.items():
        for part in dump.get("partitions", []):
            key = int(part["partition"])
            hws[(node, key)] = part.get("hw", 0)
            for offset, epoch, _crc, value in part.get("records", []):
                by_key[key][offset][node] = (epoch, value)
    out = []
    for key in sorted(by_key):
        for offset in sorted(by_key[key]):
            holders = by_key[key][offset]
            if len({json.dumps(r) for r in holders.values()}) > 1:
                out.append({"key": key, "offset": offset,
                            "replicas": {n: {"epoch": e, "value": v, "hw": hws[(n, key)]}
                                         for n, (e, v) in sorted(holders.items())},
                            "committed": all(offset < hws[(n, key)] for n in holders)})
    return out


def split_events(events: list[dict]) -> tuple[list[dict], list[dict]]:
    """(truncations, ISR changes) from the system's log events, in time order."""
    truncations, isr = [], []
    for ev in events:
        if ev.get("event") == "truncate":
            truncations.append({"time": ev["time"], "node": ev["node"], "key": ev["key"], "from": ev["from"],
                                "to": ev["to"], "source": "log"})
        elif ev.get("event") in ("isr-shrink", "isr-expand"):
            change = {k: v for k, v in ev.items() if k != "event"}
            isr.append({**change, "change": ev["event"].removeprefix("isr-")})
    truncations.sort(key=lambda t: t["time"])
    isr.sort(key=lambda t: t["time"])
    return truncations, isr


def leo_drops(samples: list[dict]) -> list[dict]:
    """A replica's LEO going down between two of its samples: a truncation the sampler saw."""
    last: dict[tuple[str, int], int] = {}
    out = []
    for s in sorted(samples, key=lambda s: s["time"]):
        for part in (s.get("state") or {}).get("partitions", []):
            k = (s["node"], int(part["partition"]))
            leo = part.get("leo")
            if leo is None:
                continue
            if k in last and leo < last[k]:
                out.append({"time_ns": s["time"], "node": k[0], "key": k[1], "from": last[k], "to": leo,
                            "source": "samples"})
            last[k] = leo
    return out


def truncation_check(expected: list, observed: list[dict], aliases: dict[str, str]) -> dict:
    """The declared truncation points, in order, against the broker log's."""
    want = [{"node": aliases.get(t.node, t.node), "key": t.key, "to": t.to} for t in expected]
    seen = [{"node": t["node"], "key": t["key"], "to": t["to"]} for t in observed]
    return {"expected": want, "observed": seen, "match": want == seen}


def _wall(iso: str) -> float:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def refine_measurement(m: dict, isr_changes: list[dict]) -> None:
    """A measure tied to a broker event takes its time from the broker's log
    line (the moment the leader decided), not from the executor's polling.

    An ISR shrink whose log line carries the leader's account is measured as
    the protocol states it: from the follower's last caught-up time as the
    leader recorded it, bounded below by replica.lag.time.max.ms (never
    early) and above by lag plus the interval since the leader's previous
    expiry check (removed at the first check after the lag ran out). A
    loaded machine delays the checks but cannot move a shrink outside these
    bounds; the time since the cut stays in the record (``since_cut_ms``).
    """
    kind = {"isr-shrink": "shrink", "isr-expand": "expand"}.get(m.get("event"))
    if kind is None or m.get("since_wall") is None:
        return
    for ev in isr_changes:
        try:
            at = _wall(ev["time"])
        except ValueError:
            continue
        if ev["change"] == kind and at >= m["since_wall"] - 0.005:
            m.update(ms=round((at - m["since_wall"]) * 1000, 1), source="broker log", log_event=ev)
            if kind == "expand":  # the leader's reason to take the follower back
                m.update(follower_leo=ev["leo"], leader_hw=ev["hw"], leo_reached_hw=ev["leo"] >= ev["hw"])
            if kind == "shrink" and ev.get("check_gap_ms", -1) >= 0 and min(ev["caught_up_ms"]) >= 0:
                lag, age = ev["lag_ms"], float(max(ev["caught_up_ms"]))
                m.update(since_cut_ms=m["ms"], cut_bound_ms=m.get("bound_ms"), since="caught-up (leader)",
                         ms=age, min_ms=float(lag), bound_ms=float(lag + ev["check_gap_ms"]),
                         check_gap_ms=ev["check_gap_ms"], within=lag < age <= lag + ev["check_gap_ms"])
                return
            if m.get("bound_ms") is not None:
                m["within"] = m["ms"] <= m["bound_ms"]
            return


# ------------------------------------------------------------------ verdict
def findings(store: Path, scenario: Scenario, variant: str, record: dict) -> dict:
    """The scenario section of results.json, without the verdict (see judge)."""
    ops = run_store.read_history(store)
    dumps, _missing = run_store.read_dumps(store)
    truncations, isr_changes = split_events(record.pop("events", []))
    for m in record.get("measurements", []):
        refine_measurement(m, isr_changes)
    trunc = None
    if variant in scenario.truncations and not record.get("error"):
        trunc = truncation_check(scenario.truncations[variant], truncations, record.get("aliases", {}))
    exp = scenario.expect.get(variant)
    return {
        "name": scenario.name, "system": scenario.system, "variant": variant, "source": scenario.source,
        "expected": None if exp is None else exp.model_dump(),
        "allowed_anomalies": scenario.allowed(variant),
        "unread_acknowledged": unread_acknowledged(ops, record.get("writes", [])),
        "divergence": divergence(dumps),
        "truncations": truncations,
        "leo_drops": leo_drops(run_store.read_samples(store)),
        "truncation_check": trunc,
        "isr_changes": isr_changes,
        **record,
    }


def judge(checked: dict, section: dict) -> dict:
    """results.json of a scenario run: the checkers' results with the
    scenario's verdict on top (`valid`) and its `scenario` section."""
    allowed = section.get("allowed_anomalies") or []
    found = {}
    for res in (checked.get("checkers") or {}).values():
        if isinstance(res, dict):
            for name, n in (res.get("counts") or {}).items():
                if n and name in ANOMALIES:
                    found[name] = found.get(name, 0) + n
    forbidden = {a: n for a, n in found.items() if a not in allowed}
    reasons = [f"{a} x{n}" for a, n in sorted(forbidden.items())]
    raw = checked.get("valid")
    checker_states = [r.get("valid") for r in (checked.get("checkers") or {}).values() if isinstance(r, dict)]
    if section.get("error"):
        valid = "unknown"
    elif forbidden:
        valid = False
    elif raw == "unknown" and (not checker_states or "unknown" in checker_states):
        valid = "unknown"
    else:
        valid = True
    for m in section.get("measurements") or []:
        if m.get("within") is False:
            low = f"{m['min_ms']:g} ms < " if m.get("min_ms") is not None else ""
            reasons.append(f"{m['name']} took {m['ms']:g} ms, outside {low}ms <= {m['bound_ms']:g} ms")
            if valid is True:
                valid = False
    trunc = section.get("truncation_check")
    if trunc and not trunc.get("match"):
        reasons.append("truncation points differ from the expected ones")
        if valid is True:
            valid = False
    exp = section.get("expected")
    as_expected = None
    if exp is not None:
        as_expected = valid == exp["valid"] and all(a in forbidden for a in exp.get("anomalies", []))
    out = dict(checked)
    out["valid"] = valid
    out["scenario"] = {**section, "verdict": valid, "reasons": reasons, "as_expected": as_expected,
                       "forbidden_found": forbidden,
                       "allowed_found": {a: n for a, n in found.items() if a in allowed},
                       "checkers_valid": raw}
    if section.get("error"):
        out["error"] = section["error"]
    return out


def analyze(store: Path, scenario: Scenario, variant: str, checked: dict, record: dict) -> dict:
    """findings + judge in one go."""
    return judge(checked, findings(store, scenario, variant, dict(record)))

"""What a scenario run found, and its verdict: a registered checker (`scenario`).

The run leaves everything in its store: the script's declared outcome in
`scenario.json` ("judged": `declared`), and in the history, ops of process
`scenario` (harness.steps.record_step, ScenarioProgram.finish): each step as
it ran, the role bindings, the measurements, the error that stopped the
steps, the system's log events, the scripted writes. `harness check` on the
store therefore rebuilds the same verdict and the same `scenario` section
of results.json as the run did (tests/scenarios: a fixture checks every store
the scenario tests make).

`findings()` gathers what a person reviewing a scenario asks first: which
acknowledged writes were lost (`unread_acknowledged`: the log checker's own
list, `checkers.log_anomalies.lost_sends`), at which offsets the replicas'
copies differ (`divergence`: the replica diff's `differences`), where each
replica truncated its log (the system's log events, and LEO drops between
samples), ISR changes, and the measurements. `judge()` then turns the
checkers' results and those findings into the scenario's verdict: the
anomalies its configuration allows are set aside and the declared
expectation is compared. Stores written before the history kept the
scenario's ops are re-judged from their results.json section
(harness.verdict).
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from checkers.vocabulary import ANOMALIES
from harness import run_store
from history.writer import FINAL_READS, SCENARIO
from scenarios.script import Scenario


def declared(scenario: Scenario, variant: str | None) -> dict:
    """What the script declares for the variant (scenario.json's "judged")."""
    exp = scenario.expect.get(variant)
    return {"name": scenario.name, "system": scenario.system, "variant": variant, "source": scenario.source,
            "expected": None if exp is None else exp.model_dump(mode="json"),
            "allowed_anomalies": scenario.allowed(variant),
            "truncations": ([t.model_dump(mode="json") for t in scenario.truncations[variant]]
                            if variant in scenario.truncations else None)}


def record_of(ops: list[dict]) -> dict | None:
    """The run's scenario record from its history ops (None: no op of process `scenario`)."""
    record = {"aliases": {}, "steps": [], "measurements": [], "writes": [], "final": None, "error": None,
              "events": [], "duration_s": None}
    seen = False
    for op in ops:
        process, f, value = op.get("process"), op.get("f"), op.get("value")
        if process == "nemesis" and f == FINAL_READS:
            record["final"] = value
        if process != SCENARIO:
            continue
        seen = True
        if f == "step":
            record["steps"].append(value)
        elif f == "bind":
            record["aliases"].update(value)
        elif f == "measure":
            record["measurements"].append(value)
        elif f == "error":
            record["error"] = value
        elif f == "events":
            record["events"] = value
        elif f == "end":
            record["writes"], record["duration_s"] = value.get("writes", []), value.get("duration_s")
    return record if seen else None


def lost_writes(record: dict, sends: list, reads: list, ends: list) -> list[dict] | None:
    """The acknowledged writes the log checker finds lost, with the acks the script sent
    them with (None: the run had no final phase, so it cannot say)."""
    from checkers.log_anomalies import lost_sends

    if record.get("final") is None:
        return None
    acks = {(w.get("key"), str(w.get("value"))): w.get("acks") for w in record.get("writes") or []}
    return [{**w, "acks": acks.get((w["key"], str(w["value"])))} for w in lost_sends(sends, reads, ends)]


def divergence(checked: dict) -> list[dict]:
    """The replica diff's `differences` (checkers/replica_diff.py): offsets whose copies
    differ, each replica's epoch, value and HW, and whether committed copies differ."""
    diff = (checked.get("checkers") or {}).get("replica-diff") or {}
    return [{"key": d["key"], "offset": d["offset"],
             "replicas": {n: {"epoch": e, "value": v, "hw": hw} for n, e, v, hw in d["replicas"]},
             "committed": d["committed"], "differs_in": d["differs_in"]}
            for d in diff.get("differences") or []]


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


def truncation_check(expected: list[dict], observed: list[dict], aliases: dict[str, str]) -> dict:
    """The declared truncation points, in order, against the broker log's."""
    want = [{"node": aliases.get(t["node"], t["node"]), "key": t["key"], "to": t["to"]} for t in expected]
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
def findings(declared: dict, record: dict, checked: dict, samples: list[dict], flat: tuple) -> dict:
    """The scenario section of results.json, without the verdict (see judge). flat: the
    history's (sends, reads, ends) rows (history.flatten)."""
    record = dict(record)
    truncations, isr_changes = split_events(record.pop("events", None) or [])
    for m in record.get("measurements", []):
        refine_measurement(m, isr_changes)
    trunc = None
    if declared.get("truncations") is not None and not record.get("error"):
        trunc = truncation_check(declared["truncations"], truncations, record.get("aliases", {}))
    return {
        "name": declared["name"], "system": declared["system"], "variant": declared["variant"],
        "source": declared["source"], "expected": declared["expected"],
        "allowed_anomalies": declared["allowed_anomalies"],
        "unread_acknowledged": lost_writes(record, *flat),
        "divergence": divergence(checked),
        "truncations": truncations,
        "leo_drops": leo_drops(samples),
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
        # a checker the workload's histories are not for (`applies: false`, workloads' not_checked)
        # counts what it does not understand: its counts are no finding
        if isinstance(res, dict) and res.get("applies") is not False:
            for name, n in (res.get("counts") or {}).items():
                if n and name in ANOMALIES:
                    found[name] = found.get(name, 0) + n
    forbidden = {a: n for a, n in found.items() if a not in allowed}
    reasons = [f"{a} x{n}" for a, n in sorted(forbidden.items())]
    raw = checked.get("valid")
    checker_states = [r.get("valid") for r in (checked.get("checkers") or {}).values()
                      if isinstance(r, dict) and r.get("applies") is not False]
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


def check_store(store_dir: str, data, checked: dict) -> dict | None:
    """The `scenario` checker: a scenario store's results (the checkers' results judged, with
    the scenario section), rebuilt from scenario.json and the history; None for any other
    store, and for one written before its history kept the scenario's ops."""
    store = Path(store_dir)
    spec = run_store.read_json(store / run_store.SCENARIO) if (store / run_store.SCENARIO).exists() else None
    if not isinstance(spec, dict) or not isinstance(spec.get("judged"), dict):
        return None
    ops = run_store.read_history(store)
    record = record_of(ops)
    if record is None:
        return None
    if data is None:   # the Spark engine: a scenario's history is small, flatten it here
        from history.flatten import flatten

        flat = flatten(ops)
        rows = (flat[0], flat[1], flat.ends)
    else:
        rows = (data.sends, data.reads, data.ends)
    return judge(checked, findings(spec["judged"], record, checked, run_store.read_samples(store), rows))


def _declare():
    from checkers.checker import Checker

    return Checker("scenario", "a scenario run's verdict: the checkers' findings against what its script "
                   "allows and expects, its measurements and truncation points", judge=check_store)


CHECKER = _declare()

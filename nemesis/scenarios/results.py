"""What a scenario run found, for results.json.

The checkers (checkers.store.check_store, or the same in-process kernels
when that driver is not there) say which anomalies the history and the
replica dumps show. This module adds what a person reviewing a scenario asks
first: which acknowledged writes were lost (key, offset, value, the op that
acknowledged them), at which offsets which replicas diverge, where each
replica truncated its log (broker log lines, and LEO drops between samples),
ISR shrinks and expansions, and the scenario's own verdict: the anomalies its
configuration allows are set aside, and the declared expectation is compared.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from nemesis.scenarios.script import DIFF_ANOMALIES, LOG_ANOMALIES, Scenario

_TRUNCATED = re.compile(r"^(\S+) \S+ broker (\d+): (\S+)-(\d+): truncated from leo (\d+) to (\d+)")
_SHRINK = re.compile(r"^(\S+) \S+ broker (\d+): (\S+)-(\d+): shrinking ISR \[([\d, ]*)\]: \[([\d, ]*)\] out of sync"
                     r"(?: \(caught up \[([-\d, ]*)\] ms ago, previous check (-?\d+) ms ago, "
                     r"replica\.lag\.time\.max\.ms=(\d+)\))?")
_EXPAND = re.compile(r"^(\S+) \S+ broker (\d+): (\S+)-(\d+): expanding ISR \[([\d, ]*)\] with (\d+) "
                     r"\(leo (\d+) >= hw (\d+)\)")


# ------------------------------------------------------------------ checkers
def check_store(store: Path) -> dict:
    """The project's checkers (log anomalies + replica diff), as `harness check` runs them."""
    from checkers.store import check_store as check

    return check(str(store))


def load_dumps(store: Path) -> tuple[dict[str, dict], list[str]]:
    dumps, missing = {}, []
    for d in sorted((store / "nodes").glob("n*")):
        f = d / "dump.json"
        if f.is_file():
            dumps[d.name] = json.loads(f.read_text())
        else:
            missing.append(d.name)
    return dumps, missing


# ------------------------------------------------------------------ findings
def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line of a killed run
    return out


def lost_writes(ops: list[dict], writes: list[dict]) -> list[dict] | None:
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


def log_events(store: Path) -> tuple[list[dict], list[dict]]:
    """(truncations, ISR changes) from the brokers' log lines, in time order."""
    truncations, isr = [], []
    for d in sorted((store / "nodes").glob("n*")):
        f = d / "broker.log"
        if not f.is_file():
            continue
        for line in f.read_text(errors="replace").splitlines():
            m = _TRUNCATED.match(line)
            if m:
                truncations.append({"time": m.group(1), "node": d.name, "key": int(m.group(4)),
                                    "from": int(m.group(5)), "to": int(m.group(6)), "source": "broker log"})
                continue
            m = _SHRINK.match(line)
            if m:
                ev = {"time": m.group(1), "node": d.name, "key": int(m.group(4)), "change": "shrink",
                      "isr": _ints(m.group(5)), "out": _ints(m.group(6))}
                if m.group(7) is not None:       # the leader's own account (replica/core/broker.py)
                    ev.update(caught_up_ms=_ints(m.group(7)), check_gap_ms=int(m.group(8)),
                              lag_ms=int(m.group(9)))
                isr.append(ev)
                continue
            m = _EXPAND.match(line)
            if m:
                isr.append({"time": m.group(1), "node": d.name, "key": int(m.group(4)), "change": "expand",
                            "isr": _ints(m.group(5)), "replica": int(m.group(6)),
                            "leo": int(m.group(7)), "hw": int(m.group(8))})
    truncations.sort(key=lambda t: t["time"])
    isr.sort(key=lambda t: t["time"])
    return truncations, isr


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.replace(",", " ").split()]


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
def analyze(store: Path, scenario: Scenario, era: str, checked: dict, record: dict) -> dict:
    """results.json of a scenario run: the checkers' results with the
    scenario's verdict on top (`valid`), and a `scenario` section."""
    ops = _read_jsonl(store / "history.jsonl")
    dumps, _missing = load_dumps(store)
    truncations, isr_changes = log_events(store)
    allowed = scenario.allowed(era)
    found = {}
    for res in (checked.get("checkers") or {}).values():
        if isinstance(res, dict):
            for name, n in (res.get("counts") or {}).items():
                if n and name in LOG_ANOMALIES + DIFF_ANOMALIES:
                    found[name] = found.get(name, 0) + n
    forbidden = {a: n for a, n in found.items() if a not in allowed}
    reasons = [f"{a} x{n}" for a, n in sorted(forbidden.items())]
    raw = checked.get("valid")
    checker_states = [r.get("valid") for r in (checked.get("checkers") or {}).values() if isinstance(r, dict)]
    if record.get("error"):
        valid = "unknown"
    elif forbidden:
        valid = False
    elif raw == "unknown" and (not checker_states or "unknown" in checker_states):
        valid = "unknown"
    else:
        valid = True
    for m in record.get("measurements", []):
        refine_measurement(m, isr_changes)
        if m.get("within") is False:
            low = f"{m['min_ms']:g} ms < " if m.get("min_ms") is not None else ""
            reasons.append(f"{m['name']} took {m['ms']:g} ms, outside {low}ms <= {m['bound_ms']:g} ms")
            if valid is True:
                valid = False
    trunc = None
    if era in scenario.truncations and not record.get("error"):
        trunc = truncation_check(scenario.truncations[era], truncations, record.get("aliases", {}))
        if not trunc["match"]:
            reasons.append("truncation points differ from the expected ones")
            if valid is True:
                valid = False
    exp = scenario.expect.get(era)
    as_expected = None
    if exp is not None:
        as_expected = valid == exp.valid and all(a in forbidden for a in exp.anomalies)
    section = {
        "name": scenario.name, "era": era, "source": scenario.source,
        "expected": None if exp is None else exp.model_dump(),
        "as_expected": as_expected,
        "verdict": valid, "reasons": reasons,
        "allowed_anomalies": allowed, "forbidden_found": forbidden,
        "allowed_found": {a: n for a, n in found.items() if a in allowed},
        "checkers_valid": raw,
        "lost_writes": lost_writes(ops, record.get("writes", [])),
        "divergence": divergence(dumps),
        "truncations": truncations,
        "leo_drops": leo_drops(_read_jsonl(store / "samples.jsonl")),
        "truncation_check": trunc,
        "isr_changes": isr_changes,
        **record,
    }
    out = dict(checked)
    out["valid"] = valid
    out["scenario"] = section
    if record.get("error"):
        out["error"] = record["error"]
    return out

"""The scenario part of results.json, for runs driven by the scenario library.

A scenario run's verdict is the scenario's: what its configuration forbids was or
was not found, and the expected outcome per variant was or was not met.  Its result
also carries the acknowledged writes the log checker found lost, the replica diff's divergent offsets per replica, truncation points and ISR
changes; each list of records becomes a table whose op columns link to the ops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .anomalies import PHRASES
from .clock import RunClock, seconds

# result field -> table title, in page order
TABLES = {
    "unread_acknowledged": "Acknowledged writes the log checker found lost",
    "divergence": "Divergent offsets (per replica)",
    "truncations": "Truncations (from broker logs)",
    "leo_drops": "LEO drops (truncation points seen in the samples)",
    "isr_changes": "ISR changes",
}
OP_COLUMNS = {"op", "ops", "invoke", "complete"}
SHOWN = {"name", "variant", "source", "expected", "as_expected", "verdict", "reasons", "error",
         "truncation_check", "allowed_anomalies", "forbidden_found", "allowed_found", *TABLES}
MAX_ROWS = 100
TIME_COLUMN = "t (s)"


@dataclass
class Table:
    title: str
    field: str      # its list in the scenario section (a key of TABLES)
    columns: list[str]
    rows: list[dict[str, Any]]
    total: int


@dataclass
class Scenario:
    name: str
    variant: str
    source: str
    description: str
    expected: str
    as_expected: bool | None
    reasons: list[str]
    error: str
    allowed: list[str]
    truncation_check: dict | None
    tables: list[Table] = field(default_factory=list)
    details: str = ""
    leo_drops: list[dict] = field(default_factory=list)


def _columns(rows: list[dict]) -> list[str]:
    seen = list(dict.fromkeys(k for r in rows for k in r))
    first = [c for c in (TIME_COLUMN, "node", "key", "offset") if c in seen]
    return first + [c for c in seen if c not in first]


def _on_the_axis(row: dict, clock: RunClock) -> dict:
    """A record's ``time`` (wall clock) or ``time_ns`` as seconds since the start."""
    if "time_ns" in row:
        t = clock.since_start(row["time_ns"])
    elif "time" in row:
        t = clock.from_wall(row["time"])
    else:
        return row
    rest = {k: v for k, v in row.items() if k not in ("time", "time_ns")}
    return {TIME_COLUMN: seconds(t) if t is not None else str(row.get("time")), **rest}


def _table(field_name: str, title: str, value: Any, clock: RunClock) -> Table | None:
    if not isinstance(value, list) or not value:
        return None
    rows = [_on_the_axis(r, clock) if isinstance(r, dict) else {"value": r} for r in value[:MAX_ROWS]]
    return Table(title, field_name, _columns(rows), rows, len(value))


def _expected_text(expected: Any) -> str:
    if not isinstance(expected, dict):
        return "" if expected is None else json.dumps(expected)
    valid = expected.get("valid")
    words = {True: "valid", False: "invalid"}.get(valid, str(valid))
    anomalies = expected.get("anomalies")
    if isinstance(anomalies, list) and anomalies:
        words += " with " + ", ".join(map(str, anomalies))
    return words


def read_scenario(results: dict | None, store_dir: Path, clock: RunClock) -> Scenario | None:
    """The scenario view, or None for a run that no scenario drove."""
    sc = (results or {}).get("scenario")
    if not isinstance(sc, dict):
        return None
    description = ""
    spec_path = store_dir / "scenario.json"
    if spec_path.is_file():
        try:
            spec = json.loads(spec_path.read_text())
            inner = spec.get("scenario", spec) if isinstance(spec, dict) else {}
            description = str(inner.get("description") or "") if isinstance(inner, dict) else ""
        except (OSError, ValueError):
            description = ""
    tables = [t for key, title in TABLES.items() if (t := _table(key, title, sc.get(key), clock))]
    extra = {k: v for k, v in sc.items() if k not in SHOWN}
    details = json.dumps(extra, indent=1, default=str) if extra else ""
    check = sc.get("truncation_check")
    drops = [d for d in sc.get("leo_drops") or [] if isinstance(d, dict)]
    return Scenario(
        name=str(sc.get("name") or ""), variant=str(sc.get("variant") or ""), source=str(sc.get("source") or ""),
        description=description, expected=_expected_text(sc.get("expected")),
        as_expected=sc.get("as_expected") if isinstance(sc.get("as_expected"), bool) else None,
        reasons=[str(r) for r in sc.get("reasons") or []] if isinstance(sc.get("reasons"), list) else [],
        error=str(sc.get("error") or ""),
        allowed=[str(a) for a in sc.get("allowed_anomalies") or []] if isinstance(sc.get("allowed_anomalies"), list) else [],
        truncation_check=check if isinstance(check, dict) else None,
        tables=tables, details=details[:20000], leo_drops=drops)


def scenario_ops(sc: Scenario | None) -> set[int]:
    """History indices in the op columns of the scenario's tables."""
    found: set[int] = set()

    def add(v: Any) -> None:
        if isinstance(v, list):
            for x in v:
                add(x)
        elif isinstance(v, int) and not isinstance(v, bool):
            found.add(v)

    for table in sc.tables if sc else []:
        for row in table.rows:
            for col in OP_COLUMNS & row.keys():
                add(row[col])
    return found


def _counts_phrase(found: Any) -> str:
    if not isinstance(found, dict) or not found:
        return ""
    parts = []
    for name, n in found.items():
        n = n if isinstance(n, int) else 1
        template = PHRASES.get(str(name), f"{{n}} {name}")
        parts.append(template.format(n=n, s="" if n == 1 else "s", ies="y" if n == 1 else "ies"))
    return "; ".join(parts)


def scenario_verdict(results: dict, sc: Scenario) -> tuple[str, str]:
    """(css class, sentence) for a scenario run."""
    raw = results.get("scenario") or {}
    valid = results.get("valid")
    where = f"scenario {sc.name} in variant {sc.variant or '?'}"
    expectation = ""
    if sc.as_expected is True:
        expectation = f" As expected ({sc.expected})." if sc.expected else " As expected."
    elif sc.as_expected is False:
        expectation = f" NOT as expected: the scenario expects {sc.expected or 'another outcome'}."
    if sc.error:
        return "unknown", f"Unknown: {where} failed to run ({sc.error}).{expectation}"
    if valid is True:
        allowed = _counts_phrase(raw.get("allowed_found"))
        tail = f"; its configuration allows what was found ({allowed})" if allowed else ""
        return "valid", f"Valid: {where} found nothing it forbids{tail}.{expectation}"
    if valid is False:
        forbidden = _counts_phrase(raw.get("forbidden_found")) or "; ".join(sc.reasons) or "forbidden anomalies"
        from reports.anomalies import gone_sentence
        return "invalid", f"Invalid: {where}: {forbidden}.{gone_sentence(results)}{expectation}"
    return "unknown", f"Unknown: {where} could not be decided.{expectation}"

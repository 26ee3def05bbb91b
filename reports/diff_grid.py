"""The replica-log diff grid: offsets down, replicas across, one cell per record.

The cells show the replicas' own dumps (``nodes/<node>/dump.json``), so a reviewer
sees the logs themselves; which offsets differ is the replica diff's answer
(its result's ``differences``, see checkers/replica_diff.py), never recomputed
here, so the grid and the checker cannot disagree.  Where the copies differ, the
cells are marked divergent if copies that had committed the offset (below their
HW) disagree, and merely differing if only uncommitted tails differ (truncation
will repair those); a divergence in the leader epoch alone is named apart
(``Grid.epoch_only``) and shown in the cells.  A store whose results.json
lacks ``differences`` (written before the checker listed them, or not checked)
gets them from the same checker function over its dumps.  Holes are
marked missing, and each replica's HW is
drawn as a line above its first uncommitted offset.  Long logs are cut to windows
around what is interesting, with the identical stretches elided.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONTEXT = 3
MAX_ROWS = 300


@dataclass
class Cell:
    text: str = ""
    title: str = ""
    css: str = ""  # "", "divergent", "missing", plus " hw" on the replica's HW offset


@dataclass
class Row:
    offset: int | None  # None for an elided gap
    cells: list[Cell] = field(default_factory=list)
    gap: int = 0
    divergent: bool = False
    anomaly: bool = False  # an offset an anomaly story names


@dataclass
class Grid:
    key: int
    replicas: list[str]
    hws: dict[str, int | None]
    leos: dict[str, int | None]
    rows: list[Row]
    divergent: list[int]
    missing: int
    differing: list[int] = field(default_factory=list)  # differences above some HW only
    epoch_only: list[int] = field(default_factory=list)  # divergent offsets whose copies agree but on the epoch

    @property
    def anchor(self) -> str:
        return f"diff-{self.key}"


def _int(x: Any) -> int | None:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def replica_logs(dumps: dict[str, dict]) -> dict[int, dict[str, dict]]:
    """partition -> node -> {"hw", "leo", "log_start", "records": {offset: (epoch, crc, value)}}."""
    out: dict[int, dict[str, dict]] = {}
    for node, dump in sorted(dumps.items()):
        parts = dump.get("partitions") if isinstance(dump.get("partitions"), list) else []
        for p in parts:
            if not isinstance(p, dict) or (key := _int(p.get("partition"))) is None:
                continue
            raw = p.get("records") or []
            records = {r[0]: (r[1], r[2], r[3]) for r in raw
                       if type(r) is list and len(r) >= 4 and type(r[0]) is int}
            if len(records) < len(raw):  # short or dict-shaped records: the slow, tolerant path
                for rec in raw:
                    if isinstance(rec, (list, tuple)) and rec and (off := _int(rec[0])) is not None:
                        records.setdefault(off, tuple(list(rec[1:4]) + [None] * (4 - len(rec)))[:3])
                    elif isinstance(rec, dict) and (off := _int(rec.get("offset"))) is not None:
                        records.setdefault(off, (rec.get("epoch"), rec.get("crc"), rec.get("value")))
            out.setdefault(key, {})[node] = {"hw": _int(p.get("hw")), "leo": _int(p.get("leo")),
                                             "log_start": _int(p.get("log_start")), "records": records}
    return out


def differences_by_key(results: dict | None, dumps: dict[str, dict]) -> dict[int, dict[int, dict]]:
    """key -> offset -> the replica diff's `differences` entry (see the module docstring)."""
    section = ((results or {}).get("checkers") or {}).get("replica-diff") if isinstance(results, dict) else None
    listed = section.get("differences") if isinstance(section, dict) else None
    if not isinstance(listed, list):
        listed = _differences_of(dumps)
    out: dict[int, dict[int, dict]] = {}
    for entry in listed:
        if isinstance(entry, dict) and (key := _int(entry.get("key"))) is not None \
                and (off := _int(entry.get("offset"))) is not None:
            out.setdefault(key, {})[off] = entry
    return out


def _differences_of(dumps: dict[str, dict]) -> list[dict]:
    """The checker's own `differences` over the dumps (no results.json to read them from)."""
    from history.flatten import flatten_dumps
    from checkers.replica_diff import differences

    try:
        return differences(*flatten_dumps(dumps))[1]
    except (KeyError, TypeError, ValueError):
        return []


def classify(logs: dict[str, dict], found: dict[int, dict]) -> tuple[list[int], list[int], set[int], set[int], list[int]]:
    """(offsets, divergent, differing, missing, epoch_only) of one partition: the offsets its
    replicas hold, the replica diff's committed and uncommitted differences (`found`:
    offset -> entry), the offsets some replica lacks, and the divergent offsets whose copies
    differ in their leader epoch alone."""
    replicas = sorted(logs)
    offsets = sorted(set().union(*(logs[r]["records"] for r in replicas)) if replicas else set())
    divergent = sorted(o for o, e in found.items() if e.get("committed"))
    differing = {o for o, e in found.items() if not e.get("committed")}
    epoch_only = [o for o in divergent if found[o].get("differs_in") == "epoch"]
    missing = {o for o in offsets if sum(o in logs[r]["records"] for r in replicas) < len(replicas)}
    return offsets, divergent, differing, missing, epoch_only


def divergent_records(found: dict[int, dict[int, dict]]) -> list[tuple[int, int, list[tuple[str, Any, Any]]]]:
    """(key, offset, [(node, epoch, value)]) of every divergence the replica diff lists."""
    return [(key, off, [(n, e, v) for n, e, v, *_ in entry.get("replicas") or []])
            for key in sorted(found) for off, entry in sorted(found[key].items()) if entry.get("committed")]


def build_grid(key: int, logs: dict[str, dict], found: dict[int, dict], focus: set[int] = frozenset()) -> Grid:
    """The grid of one partition (`found`: the replica diff's differences of it, offset ->
    entry); offsets in ``focus`` (anomaly offsets) are never folded."""
    replicas = sorted(logs)
    hws = {r: logs[r]["hw"] for r in replicas}
    leos = {r: logs[r]["leo"] for r in replicas}
    offsets, divergent, differing, missing, epoch_only = classify(logs, found)
    interesting = set(divergent) | differing | set(focus) | {h for h in hws.values() if h is not None}
    if offsets:
        interesting |= {offsets[0], offsets[-1]}
        interesting |= {o for o in missing if any(hws[r] is not None and o < hws[r] for r in replicas)}
    shown = sorted({o + d for o in interesting for d in range(-CONTEXT, CONTEXT + 1)
                    if offsets and offsets[0] <= o + d <= max(offsets[-1], max((h or 0) for h in hws.values()))})
    shown = _cap(shown, sorted(set(divergent) | set(focus)))
    rows, prev = [], None
    diverge_set = set(divergent)
    for off in shown:
        if prev is not None and off > prev + 1:
            rows.append(Row(None, gap=off - prev - 1))
        rows.append(_row(off, replicas, logs, hws, off in diverge_set, off in differing, off in epoch_only))
        rows[-1].anomaly = off in focus
        prev = off
    return Grid(key, replicas, hws, leos, rows, divergent, len(missing), sorted(differing), epoch_only)


def _cap(shown: list[int], divergent: list[int]) -> list[int]:
    if len(shown) <= MAX_ROWS:
        return shown
    keep = set(divergent[: MAX_ROWS // 2])
    for off in shown:
        if len(keep) >= MAX_ROWS:
            break
        keep.add(off)
    return sorted(keep)


def _row(off: int, replicas: list[str], logs: dict, hws: dict, divergent: bool, differing: bool,
         epoch_only: bool = False) -> Row:
    row = Row(off, divergent=divergent)
    for r in replicas:
        rec = logs[r]["records"].get(off)
        hw_mark = " hw" if hws[r] == off else ""
        if rec is None:
            start = logs[r]["log_start"]
            why = "below log start" if start is not None and off < start else "no record"
            row.cells.append(Cell("-", f"{r} @ {off}: {why}", ("missing" + hw_mark).strip()))
            continue
        epoch, crc, value = rec
        text = value if isinstance(value, str) else repr(value)
        shown = text[:40] + ("..." if len(text) > 40 else "") + (f" (epoch {epoch})" if epoch_only else "")
        row.cells.append(Cell(shown,
                              f"{r} @ {off}: epoch {epoch}, crc {crc}, value {text[:500]}",
                              (("divergent" if divergent else "differs" if differing else "") + hw_mark).strip()))
    return row


def grids(dumps: dict[str, dict], keys: list[int], found: dict[int, dict[int, dict]],
          focus: dict[int, set[int]] | None = None, logs: dict[int, dict[str, dict]] | None = None) -> list[Grid]:
    """Grids for ``keys`` plus every partition whose replicas diverge (`found`:
    differences_by_key); ``focus`` offsets unfolded."""
    logs = replica_logs(dumps) if logs is None else logs
    focus = focus or {}
    built = {k: build_grid(k, logs[k], found.get(k, {}), focus.get(k, set())) for k in logs}
    chosen = [k for k in sorted(built) if k in set(keys) or built[k].divergent]
    return [built[k] for k in chosen]

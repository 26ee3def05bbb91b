"""The replica-log diff grid: offsets down, replicas across, one cell per record.

Built from the replicas' own dumps (``nodes/<node>/dump.json``), independently of
the checker, so a reviewer sees the logs themselves.  Where replicas disagree at an
offset, the cells are marked divergent if copies that had committed the offset
(below their HW) disagree, and merely differing if only uncommitted tails differ
(truncation will repair those). Copies disagree in their record (CRC, or value) or in
their leader epoch, as the replica diff compares them: the record's CRC does not cover
the epoch (Kafka's batch CRC leaves partitionLeaderEpoch out too), so an epoch-only
difference is named apart (``Grid.epoch_only``) and shown in the cells.  Holes are
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


def _same(a: tuple, b: tuple) -> bool:
    """Two records agree when their leader epochs (where both have one) and their CRCs
    (or, lacking them, their values) are equal."""
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return False
    return _same_record(a, b)


def _same_record(a: tuple, b: tuple) -> bool:
    """The records themselves agree: their CRCs (or, lacking them, their values) are equal."""
    if a[1] is not None and b[1] is not None:
        return a[1] == b[1] and a[2] == b[2]
    return a[2] == b[2]


def classify(logs: dict[str, dict]) -> tuple[list[int], list[int], set[int], set[int], list[int]]:
    """(offsets, divergent, differing, missing, epoch_only) of one partition's replica logs;
    epoch_only: the divergent offsets whose committed copies hold the same record."""
    replicas = sorted(logs)
    hws = {r: logs[r]["hw"] for r in replicas}
    offsets = sorted(set().union(*(logs[r]["records"] for r in replicas)) if replicas else set())
    divergent, differing, missing, epoch_only = [], set(), set(), []
    for off in offsets:
        held = [logs[r]["records"][off] for r in replicas if off in logs[r]["records"]]
        if any(not _same(held[0], h) for h in held[1:]):
            committed = [logs[r]["records"][off] for r in replicas
                         if off in logs[r]["records"] and hws[r] is not None and off < hws[r]]
            if any(not _same(committed[0], h) for h in committed[1:]):
                divergent.append(off)  # copies disagree on data they had committed
                if all(_same_record(committed[0], h) for h in committed[1:]):
                    epoch_only.append(off)  # ... on its leader epoch alone
            else:
                differing.add(off)  # an uncommitted tail that truncation will repair
        if len(held) < len(replicas):
            missing.add(off)
    return offsets, divergent, differing, missing, epoch_only


def divergent_records(logs: dict[int, dict[str, dict]]) -> list[tuple[int, int, list[tuple[str, Any, Any]]]]:
    """(key, offset, [(node, epoch, value)]) wherever committed copies disagree."""
    out = []
    for key in sorted(logs):
        for off in classify(logs[key])[1]:
            out.append((key, off, [(n, logs[key][n]["records"][off][0], logs[key][n]["records"][off][2])
                                   for n in sorted(logs[key]) if off in logs[key][n]["records"]]))
    return out


def build_grid(key: int, logs: dict[str, dict], focus: set[int] = frozenset()) -> Grid:
    """The grid of one partition; offsets in ``focus`` (anomaly offsets) are never folded."""
    replicas = sorted(logs)
    hws = {r: logs[r]["hw"] for r in replicas}
    leos = {r: logs[r]["leo"] for r in replicas}
    offsets, divergent, differing, missing, epoch_only = classify(logs)
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


def grids(dumps: dict[str, dict], keys: list[int], focus: dict[int, set[int]] | None = None,
          logs: dict[int, dict[str, dict]] | None = None) -> list[Grid]:
    """Grids for ``keys`` plus every partition whose replicas diverge; ``focus`` offsets unfolded."""
    logs = replica_logs(dumps) if logs is None else logs
    focus = focus or {}
    built = {k: build_grid(k, logs[k], focus.get(k, set())) for k in logs}
    chosen = [k for k in sorted(built) if k in set(keys) or built[k].divergent]
    return [built[k] for k in chosen]

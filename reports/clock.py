"""One time format for the whole report: seconds since the run's start.

History ops, samples and the scenario's records carry nanoseconds since the
history's time zero; broker and controller logs carry wall-clock ISO times.
Both are turned into seconds since time zero here, so every table and plot of a
report uses one axis, and the header gives the wall-clock time of that zero.

The wall-clock anchor comes, best first, from ``test.json`` (``t0_wall``, epoch
seconds at history time zero, written by the runner), from the scenario's step
records (each carries its history time and the wall clock when it finished), or
from ``test.json``'s ``start`` (whole seconds: log times are then approximate,
and the header says so).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunClock:
    t0_wall: float | None  # epoch seconds at history time zero
    source: str  # where the anchor came from, for the header

    @property
    def exact(self) -> bool:
        return self.source in ("test.json t0_wall", "scenario steps")

    def since_start(self, ns: Any) -> float | None:
        """Seconds since time zero of a history/sample time in nanoseconds."""
        try:
            return int(ns) / 1e9
        except (TypeError, ValueError):
            return None

    def from_wall(self, iso: str) -> float | None:
        """Seconds since time zero of a log line's ISO wall-clock time."""
        if self.t0_wall is None:
            return None
        at = parse_iso(iso)
        return None if at is None else at - self.t0_wall

    def header(self) -> str:
        if self.t0_wall is None:
            return "wall-clock start unknown"
        when = dt.datetime.fromtimestamp(self.t0_wall, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        note = "" if self.exact else " (to the second: log times are approximate)"
        return f"time 0 s = {when} UTC{note}"


def parse_iso(iso: Any) -> float | None:
    """Epoch seconds of ``2026-11-23T13:50:19.744Z`` (or without fraction), else None."""
    if not isinstance(iso, str):
        return None
    text = iso.strip().removesuffix("Z")
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            return dt.datetime.strptime(text, fmt).replace(tzinfo=dt.timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def run_clock(test: dict, results: dict | None) -> RunClock:
    """The run's anchor, from the best source the store has."""
    t0 = test.get("t0_wall")
    if isinstance(t0, (int, float)) and not isinstance(t0, bool):
        return RunClock(float(t0), "test.json t0_wall")
    steps = ((results or {}).get("scenario") or {}).get("steps")
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        done, wall = step.get("done", step.get("end")), step.get("done_wall")
        if isinstance(done, int) and isinstance(wall, (int, float)):
            return RunClock(float(wall) - done / 1e9, "scenario steps")
    start = parse_iso(test.get("start"))
    return RunClock(start, "test.json start") if start is not None else RunClock(None, "none")


def seconds(value: float | None) -> str:
    """The report's one time format: seconds since the start, three decimals."""
    return "" if value is None else f"{value:.3f}"

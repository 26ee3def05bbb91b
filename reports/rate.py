"""Whether a run's clients kept to the configured rate while no fault was active.

A fault slows the clients on purpose (sends wait out their timeout, processes start
over), so the rate a run is asked to hold is judged outside the fault windows: the
client invocations whose invocation time falls in the main phase but in no fault
interval, over the seconds of the main phase that no fault covers. The main phase
runs from the first client invocation to the last one before the runner's `final`
nemesis op (the final heal; the final reads come after it). Everything here comes
from the history (paired into ops, faults from its nemesis ops) and the configured
rate from test.json.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from .ops import FINAL, NEMESIS, SECONDS, Fault, Op

HELD_FRACTION = 0.9    # achieved / configured at or above this is "held" (Poisson arrivals: a few % of noise)
MIN_OUTSIDE_S = 1.0    # less fault-free time than this says nothing either way


@dataclass(frozen=True, slots=True)
class RateHeld:
    """The configured rate beside what the clients invoked outside fault windows."""

    configured: float           # ops/s over all clients (test.json `rate`)
    invocations: int            # client invocations outside fault windows, in the main phase
    outside_s: float            # seconds of the main phase that no fault covers
    phase: tuple[int, int]      # the main phase, ns since the start
    windows: tuple[tuple[int, int], ...]   # the fault windows within it, merged, ns

    @property
    def achieved(self) -> float | None:
        return self.invocations / self.outside_s if self.outside_s >= MIN_OUTSIDE_S else None

    @property
    def held(self) -> bool | None:
        """True or False; None when too little of the run was fault-free to tell."""
        achieved = self.achieved
        return None if achieved is None else achieved >= HELD_FRACTION * self.configured

    def sentence(self) -> str:
        """The summary's one line."""
        achieved = self.achieved
        if achieved is None:
            return (f"rate: not measurable: {self.outside_s:.1f} s of the run were outside fault windows "
                    f"({self.configured:g} ops/s configured)")
        word = "held" if self.held else "not held"
        return (f"rate {word}: {achieved:.1f} ops/s of {self.configured:g} configured outside fault windows "
                f"({self.invocations:,} invocations in {self.outside_s:.1f} s; held means at least "
                f"{HELD_FRACTION:.0%})")


def configured_rate(test: dict | None) -> float | None:
    """test.json's `rate`, when it is a positive number."""
    rate = (test or {}).get("rate")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
        return None
    return float(rate)


def main_phase(ops: list[Op]) -> tuple[int, int] | None:
    """(first, last) client invocation time before the runner's `final` op, ns; None without any."""
    final = min((op.start for op in ops if op.process == NEMESIS and str(op.f) == FINAL), default=None)
    starts = [op.start for op in ops
              if op.process != NEMESIS and op.invoke_index is not None and (final is None or op.start < final)]
    return (min(starts), max(starts)) if starts else None


def merged_windows(faults: list[Fault], phase: tuple[int, int]) -> list[tuple[int, int]]:
    """The fault intervals clipped to the phase, overlapping ones merged, in time order."""
    lo, hi = phase
    spans = sorted((max(f.start, lo), min(f.end, hi)) for f in faults if f.end >= lo and f.start <= hi)
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def rate_held(ops: list[Op], faults: list[Fault], test: dict | None) -> RateHeld | None:
    """The figure for a run; None when test.json names no rate or no client invoked anything."""
    configured = configured_rate(test)
    phase = main_phase(ops)
    if configured is None or phase is None:
        return None
    windows = merged_windows(faults, phase)
    starts = [w[0] for w in windows]
    inside_s = sum(end - start for start, end in windows)

    def in_a_window(t: int) -> bool:
        i = bisect_right(starts, t) - 1
        return i >= 0 and t <= windows[i][1]

    count = sum(1 for op in ops
                if op.process != NEMESIS and op.invoke_index is not None
                and phase[0] <= op.start <= phase[1] and not in_a_window(op.start))
    return RateHeld(configured, count, (phase[1] - phase[0] - inside_s) * SECONDS, phase, tuple(windows))

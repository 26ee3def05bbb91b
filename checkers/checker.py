"""What a registered store checker is (entry-point group `replog.checkers`):
its name (its section in results.json), the capability of the system whose
data it reads (e.g. `dump`), and the in-process check over a store's
flattened inputs, and optionally its Spark driver. The names it can report are in checkers/vocabulary.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from checkers.vocabulary import of_checker


def merge_valid(verdicts: Iterable) -> bool | str:
    """The verdict lattice, false > unknown > true: False if any verdict is False,
    else "unknown" if any is not True, else True (also for none at all)."""
    verdicts = list(verdicts)
    if any(v is False for v in verdicts):
        return False
    if any(v is not True for v in verdicts):
        return "unknown"
    return True


@dataclass(frozen=True)
class StoreData:
    """A store's history and replica dumps, flattened (history.flatten)."""

    sends: list
    reads: list
    records: list
    replicas: list
    dumps_complete: bool  # every data node left a readable dump
    ends: list = ()       # keys read to their end in the final phase (history.flatten ends)


@dataclass(frozen=True)
class Checker:
    name: str
    description: str
    check: Callable[[StoreData], dict]  # -> {"valid", "counts", "examples", ...}
    needs: tuple[str, ...] = ()
    # its Spark driver, a module (contract in checkers/spark/engine.py); None: under
    # --engine spark its result is {"valid": "unknown", "note": "no spark driver"}
    spark: str | None = None

    @property
    def anomalies(self) -> tuple[str, ...]:
        return of_checker(self.name)

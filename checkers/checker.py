"""What a registered store checker is (entry-point group `replog.checkers`):
its name (its section in results.json), the capability of the system whose
data it reads (e.g. `dump`), and the in-process check over a store's
flattened inputs, and optionally its Spark driver. The names it can report are in checkers/vocabulary.py.

A checker may instead judge the run as a whole from the other checkers'
results (`judge`, e.g. a scenario's verdict against what its script
allows): it runs after them, in either engine (checkers.check_store.judge_run),
and returns the results document it makes of them, or None for a store that
is not its kind; its `check` is never called."""
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
    check: Callable[[StoreData], dict] = None  # -> {"valid", "counts", "examples", ...}; None for a judge
    needs: tuple[str, ...] = ()
    # its Spark driver, a module (contract in checkers/spark/engine.py); None: under
    # --engine spark its result is {"valid": "unknown", "note": "no spark driver"}
    spark: str | None = None
    # judge(store_dir, data (None under Spark), the other checkers' results) -> results or None
    judge: Callable[[str, "StoreData | None", dict], dict | None] | None = None

    def __post_init__(self) -> None:
        if self.check is None and self.judge is None:
            raise TypeError(f"checker {self.name!r}: give it a check or a judge")
        if self.check is None:  # the registry's protocol asks for a callable `check`
            object.__setattr__(self, "check", _judges_only)

    @property
    def anomalies(self) -> tuple[str, ...]:
        return of_checker(self.name)


def _judges_only(data: StoreData) -> dict:
    raise TypeError("a judging checker reads the other checkers' results (Checker.judge), not the store's rows")


def data_checkers(registered: dict) -> dict:
    """The registered checkers that check a store's rows (not the judges)."""
    return {name: c for name, c in registered.items() if getattr(c, "judge", None) is None}

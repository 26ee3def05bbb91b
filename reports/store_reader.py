"""Tolerant reading of a run store for the report.

A report must still render when a run crashed half way or when the formats grew:
every reader here returns an empty value for a missing file, skips lines it cannot
parse (counting them, so the report can say so) and ignores fields it does not know.
"""

from __future__ import annotations

import logging

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.run_store import read_dumps as _read_dumps
from harness.run_store import read_json, read_jsonl, read_results  # the store's tolerant readers (one set of them)

log = logging.getLogger(__name__)


@dataclass
class Store:
    """Everything the report reads from one store directory."""

    path: Path
    test: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    dumps: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # what could not be read, for the page


def read_dumps(nodes_dir: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    """``nodes/<node>/dump.json`` for every node that has one."""
    return _read_dumps(nodes_dir.parent, problems)[0]


def read_edn_history(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """A Jepsen ``history.edn``, through the checkers' reader (the one EDN mapping)."""
    try:
        from history.formats import read_history
    except ImportError:
        problems.append("history.edn found but history.formats is not available to read it")
        return []
    try:
        return [op for op in read_history(str(path)) if isinstance(op, dict)]
    except Exception as exc:  # noqa: BLE001 - any reader error becomes a note on the page
        problems.append(f"history.edn: {exc}")
        return []


def read_store(store_dir: str | Path, with_history: bool = True) -> Store:
    """Read a store; ``with_history=False`` skips the big files (for the index)."""
    path = Path(store_dir).resolve()
    problems: list[str] = []
    test = read_json(path / "test.json", problems)
    results = read_results(path, problems)
    store = Store(path=path, test=test if isinstance(test, dict) else {},
                  results=results if isinstance(results, dict) else None, problems=problems)
    if with_history:
        store.history = read_jsonl(path / "history.jsonl", problems)
        if not store.history and (path / "history.edn").is_file():
            store.history = read_edn_history(path / "history.edn", problems)
        store.samples = read_jsonl(path / "samples.jsonl", problems)
        store.dumps = read_dumps(path / "nodes", problems)
        if not store.history:
            problems.append("history.jsonl is missing or empty")
    return store

"""Tolerant reading of a run store for the report.

A report must still render when a run crashed half way or when the formats grew:
every reader here returns an empty value for a missing file, skips lines it cannot
parse (counting them, so the report can say so) and ignores fields it does not know.
"""

from __future__ import annotations

import json
import logging

try:  # several times faster on million-line histories; the standard library otherwise
    from orjson import JSONDecodeError as _DecodeError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a project dependency
    _DecodeError = ValueError
    _loads = json.loads
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def read_json(path: Path, problems: list[str]) -> Any:
    """One JSON document, or None when the file is missing or unreadable."""
    if not path.is_file():
        return None
    try:
        return _loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name}: cannot parse ({exc})")
        return None


def read_jsonl(path: Path, problems: list[str], want=dict) -> list[Any]:
    """JSON lines of type ``want``; bad lines are skipped and counted once."""
    if not path.is_file():
        return []
    rows, bad, first_bad = [], 0, None
    loads = _loads
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = loads(line)
            except (ValueError, _DecodeError):
                row = None
            if isinstance(row, want):
                rows.append(row)
            else:
                bad += 1
                first_bad = first_bad or lineno
    if bad:
        problems.append(f"{path.name}: skipped {bad} unreadable line(s), first at line {first_bad}")
    return rows


def read_dumps(nodes_dir: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    """``nodes/<node>/dump.json`` for every node that has one."""
    dumps: dict[str, dict[str, Any]] = {}
    if not nodes_dir.is_dir():
        return dumps
    for node_dir in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
        dump = read_json(node_dir / "dump.json", problems)
        if isinstance(dump, dict):
            dumps[node_dir.name] = dump
    return dumps


def read_edn_history(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """A Jepsen ``history.edn``, through the checkers' reader (the one EDN mapping)."""
    try:
        from checkers.history import read_history
    except ImportError:
        problems.append("history.edn found but checkers.history is not available to read it")
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
    results = read_json(path / "results.json", problems)
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

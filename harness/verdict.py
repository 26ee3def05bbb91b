"""Checking a store and turning results into exit codes (0 valid, 1 invalid,
2 unknown or error). The checkers live in checkers/; until they are
importable we say "unknown" rather than invent a verdict."""
from __future__ import annotations

import importlib
from pathlib import Path

from harness.store import write_json


def exit_code(results: dict | None) -> int:
    valid = (results or {}).get("valid")
    return 0 if valid is True else 1 if valid is False else 2


def check_store(store_dir: Path, engine: str = "local", master: str | None = None) -> dict:
    try:
        mod = importlib.import_module("checkers.store")
        check = mod.check_store
    except (ImportError, AttributeError) as e:
        results = {"valid": "unknown", "error": f"checker not available: checkers.store.check_store ({e})"}
        write_json(store_dir / "results.json", results)
        return results
    return check(str(store_dir), engine=engine, master=master)


def summary(results: dict) -> str:
    parts = [f"valid={results.get('valid')}"]
    for name, res in sorted((results.get("checkers") or {}).items()):
        if isinstance(res, dict):
            counts = {k: v for k, v in (res.get("counts") or {}).items() if v}
            parts.append(f"{name}={res.get('valid')}" + (f" {counts}" if counts else ""))
    if results.get("error"):
        parts.append(f"error: {results['error']}")
    stats = results.get("stats")
    if stats:
        parts.append("ops " + " ".join(f"{k}={v}" for k, v in stats.items()))
    return "; ".join(parts)

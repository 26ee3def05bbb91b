"""`harness check-history` (engine local): search every key of any history, one after another.

Also holds what every linearizability driver shares: splitting a history into
per-key work and merging per-key verdicts into one result (also used by the
`linearizability` store checker, checkers/linearizability.py, and its Spark
driver, checkers/spark/linearizability.py).
"""
from __future__ import annotations

import time
from typing import Any

from checkers.checker import merge_valid
from checkers.linear.calls import Call, calls_by_key
from checkers.linear.models import Model, parse_model
from checkers.linear.wgl import DEFAULT_MAX_CONFIGS, check_calls


def key_sort(key: Any) -> tuple:
    """Order keys deterministically even when they mix types (None, int, str)."""
    return (key is not None, type(key).__name__, key if isinstance(key, (int, float, str)) else repr(key))


def split_history(ops: list[dict], model: Model) -> list[tuple[Any, list[Call]]]:
    """(key, calls) pairs in a stable key order."""
    by_key = calls_by_key(ops, model)
    return sorted(((key, model.prepare(calls)) for key, calls in by_key.items()),
                  key=lambda item: key_sort(item[0]))


MAX_COUNTEREXAMPLES = 5
"""Counterexamples listed per result (the first invalid keys in key order)."""


def merge_results(per_key: list[tuple[Any, dict]], model_spec: str, engine: str) -> dict:
    """Per-key verdicts -> one JSON-able result (invalid beats unknown beats valid)."""
    invalid = [(k, r) for k, r in per_key if r["valid"] is False]
    unknown = [(k, r) for k, r in per_key if r["valid"] == "unknown"]
    valid = merge_valid(r["valid"] for _k, r in per_key)
    result: dict[str, Any] = {
        "valid": valid,
        "model": model_spec if isinstance(model_spec, str) else model_spec.name,
        "engine": engine,
        "keys": len(per_key),
        "calls": sum(r.get("calls", 0) for _, r in per_key),
        "configs": sum(r.get("configs", 0) for _, r in per_key),
    }
    if invalid:
        result["invalid_keys"] = [k for k, _ in invalid]
        result["counterexamples"] = [
            {"key": key, "op": r["op"], "linearized": r["linearized"],
             "concurrent": r.get("concurrent", []), "state": r["state"]}
            for key, r in invalid[:MAX_COUNTEREXAMPLES]]
        result["counterexample"] = result["counterexamples"][0]  # the first key's, as before
    if unknown:
        result["unknown_keys"] = [k for k, _ in unknown]
        result["reason"] = sorted({r.get("reason", "limit") for _, r in unknown})
    return result


def check_ops(
    ops: list[dict],
    model: str | Model,
    time_limit: float | None = None,
    max_configs: int = DEFAULT_MAX_CONFIGS,
) -> dict:
    """Check a history in this process; ``time_limit`` (s) covers all keys."""
    spec = parse_model(model)
    deadline = None if time_limit is None else time.monotonic() + time_limit
    started = time.monotonic()
    per_key = [
        (key, check_calls(spec.fresh(), calls, deadline=deadline, max_configs=max_configs))
        for key, calls in split_history(ops, spec)
    ]
    result = merge_results(per_key, model, "local")
    result["seconds"] = round(time.monotonic() - started, 3)
    return result

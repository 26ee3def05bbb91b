"""The rule the linearizability checker and the log checker keep together, as
assertions: a lost or divergent acknowledged write is not linearizable, and a
history the log checker passes is. Used by tests/checkers/test_linearizability.py
on the histories it builds, and by tests/conftest.py on every results.json the
suite writes (a helper module: no conftest imports a test module)."""
from __future__ import annotations

LOST_OR_DIVERGENT = ("lost-write", "unseen", "read-then-lost", "inconsistent-offsets")


def agree(log: dict, linear: dict, holes: dict | None = None) -> None:
    """The rule, as an assertion. `holes`: per key the
    offset ranges the final reads found unreadable (workloads/log.py) -- a lost-write
    there is seen by failed reads only, which say nothing to the log model, so it
    need not make the history non-linearizable."""
    if only_in_holes(log, holes or {}):
        return
    if any(log["counts"].get(kind) for kind in LOST_OR_DIVERGENT):
        assert linear["valid"] is False, (log["counts"], linear)
    if log["valid"] is True:
        assert linear["valid"] is True, linear.get("counterexamples")


def disagreement(results_json) -> str | None:
    """What is wrong with one results.json under the rule, or None."""
    import json

    try:
        results = json.loads(open(results_json, encoding="utf-8").read())
    except (OSError, ValueError):
        return None
    checkers = results.get("checkers") or {}
    log, linear = checkers.get("log"), checkers.get("linearizability")
    # Only what the store checker wrote (stores copied from tests/data predate it,
    # and tests may put other results there).
    if not isinstance(log, dict) or not isinstance(linear, dict) or "time_limit" not in linear:
        return None
    if linear.get("applies") is False:   # not for this history (the queue workload's transactions)
        return None
    final = results.get("final") or (results.get("scenario") or {}).get("final") or {}
    holes = {k: v["unreadable"] for k, v in (final.get("keys") or {}).items() if v.get("unreadable")}
    try:
        agree(log, linear, holes)
    except AssertionError:
        return f"log {log.get('valid')} {log.get('counts')}, linearizability {linear.get('valid')}"
    return None


def only_in_holes(log: dict, holes: dict) -> bool:
    """Every lost or divergent finding is a lost-write or read-then-lost inside a final-read hole."""
    in_holes = ("lost-write", "read-then-lost")
    if not holes or any(log["counts"].get(kind) for kind in LOST_OR_DIVERGENT if kind not in in_holes):
        return False
    for kind in in_holes:
        examples = (log.get("examples") or {}).get(kind) or []
        if len(examples) != log["counts"].get(kind, 0) or not all(
                any(a <= e["offset"] <= b for a, b, *_ in holes.get(str(e["key"]), [])) for e in examples):
            return False
    return True

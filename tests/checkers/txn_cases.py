"""The hand-made transactional histories (tests/data/txn/*.edn, each with what Jepsen's
checker reports for it in its header) and what our txn checker must count on each."""
from __future__ import annotations

import os

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "txn")

# file -> the txn checker's non-zero counts, and its verdict
EXPECTED = {
    "valid": ({}, True),
    "G0": ({"G0": 1}, True),
    "G0-process": ({"G0-process": 1}, True),
    "G0-realtime": ({"G0-realtime": 1}, True),
    "G1c": ({"G1c": 1}, False),
    "G1c-process": ({"G1c-process": 1}, False),
    "G1c-realtime": ({"G1c-realtime": 1}, False),
    "G1a": ({"G1a": 1}, False),
    "precommitted-read": ({"precommitted-read": 1}, False),
    "lost-write": ({"txn-lost-write": 2}, False),
    "lost-write-past-last-read": ({"txn-lost-write": 1}, False),
    "duplicate": ({"txn-duplicate": 1}, False),
    "inconsistent-offsets": ({"txn-inconsistent-offsets": 1, "txn-lost-write": 1}, False),
}


def path(name: str) -> str:
    return os.path.join(DATA, f"{name}.edn")


def jepsen_says(name: str) -> str:
    """The header comment of a history: what Jepsen's checker reports for it."""
    with open(path(name), encoding="utf-8") as handle:
        return "".join(line for line in handle if line.startswith(";"))

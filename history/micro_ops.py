"""Jepsen's queue micro-ops, checked as a parsed op becomes a history record.

A `txn` op (and a `send` / `poll` written as micro-ops) holds a list of
`["send", key, value]` / `["poll"]`; its `ok` completion holds
`["send", key, [offset, value]]` / `["poll", {key: [[offset, value], ...]}]`;
`fail` and `info` completions may hold either shape (Jepsen's carry the
invocation's); an `ok` send whose value is not a list has no known offset
(Jepsen's checker accepts that too). Anything else is refused in one line naming the op's index and
what was expected, so a malformed import is not flattened into silence.

Why apart from the readers: the same check holds for JSONL and EDN input, and
the EDN tokenizer stays a tokenizer.
"""
from __future__ import annotations

from typing import Any

from history.formats import HistoryError

MICRO_FS = ("send", "poll")
# The micro-ops of Jepsen's other transactional workloads (registers, list-append: e.g. the
# Knossos corpus's multi-register histories). A txn made of these is not a queue txn: it
# is left alone (no sends, no polls), not refused.
OTHER_FS = frozenset({"r", "w", "read", "write", "cas", "append"})
INVOKED = '["send", key, value] or ["poll"]'
COMPLETED = '["send", key, [offset, value]] or ["poll", {key: [[offset, value], ...]}]'


def is_micro_ops(op: dict) -> bool:
    """Whether the op's value is to be read as micro-ops (every txn; a send or poll in Jepsen's shape)."""
    if op.get("f") == "txn":
        return True
    value = op.get("value")
    return op.get("f") in MICRO_FS and isinstance(value, (list, tuple)) and bool(value) \
        and isinstance(value[0], (list, tuple))


def is_other_workloads(op: dict) -> bool:
    """Whether a txn op holds another workload's micro-ops only (see OTHER_FS)."""
    value = op.get("value")
    return op.get("f") == "txn" and isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(m, (list, tuple)) and m and m[0] in OTHER_FS for m in value)


def check(op: dict) -> None:
    """Raise HistoryError if a micro-op op is malformed."""
    kind = op.get("type")
    where = f"op {op.get('index')} ({op.get('f')} {kind})"
    value = op.get("value")
    if value is None and kind in ("fail", "info"):
        return
    if not isinstance(value, (list, tuple)):
        raise HistoryError(f"{where}: expected a list of micro-ops {INVOKED}; got {_short(value)}")
    for number, mop in enumerate(value):
        problem = _problem(mop, kind)
        if problem:
            raise HistoryError(f"{where}: micro-op {number} {_short(mop)}: {problem}")


def _problem(mop: Any, kind: str) -> str | None:
    if not isinstance(mop, (list, tuple)) or not mop:
        return f"expected {COMPLETED if kind == 'ok' else INVOKED}"
    name = mop[0]
    if name not in MICRO_FS:
        return f"unknown micro-op {name!r}; expected send or poll"
    if name == "send" and len(mop) == 3 and not _is_key(mop[1]):
        return (f"expected integer keys (partitions), as the harness and Jepsen's Kafka workload "
                f"write them; got {mop[1]!r}")
    invoked = (name == "send" and len(mop) == 3 and _is_key(mop[1])) or (name == "poll" and len(mop) == 1)
    completed = _completed_send(mop) if name == "send" else _completed_poll(mop)
    if kind == "invoke" and not invoked:
        return f"expected {INVOKED}"
    if kind == "ok" and not completed:
        return f"expected {COMPLETED} in an ok completion"
    if kind in ("fail", "info") and not (invoked or completed):
        return f"expected {INVOKED} or {COMPLETED}"
    return None


def _is_key(key: Any) -> bool:
    return isinstance(key, int) and not isinstance(key, bool)


def _is_offset(offset: Any) -> bool:
    return offset is None or _is_key(offset)


def _completed_send(mop) -> bool:
    """[send, key, [offset, value]]; or a bare value, the offset unknown (Jepsen's
    checker reads that too: `version-orders-reduce-mop`)."""
    if len(mop) != 3 or not _is_key(mop[1]):
        return False
    body = mop[2]
    return not isinstance(body, (list, tuple)) or (len(body) == 2 and _is_offset(body[0]))


def _completed_poll(mop) -> bool:
    if len(mop) != 2 or not isinstance(mop[1], dict):
        return False
    for key, pairs in mop[1].items():
        if not (_is_key(key) or isinstance(key, str) and key.lstrip("-").isdecimal()) or not isinstance(pairs, (list, tuple)):
            return False
        if not all(isinstance(p, (list, tuple)) and len(p) == 2 and _is_key(p[0]) for p in pairs):
            return False
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

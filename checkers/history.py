"""Read and write histories: the harness's ``history.jsonl`` and Jepsen's EDN.

Both formats come out as the same plain-dict ops (docs/interfaces.md):
``{"index", "process", "type", "f", "value", ...}`` with ``type`` one of
``invoke|ok|fail|info``, EDN keywords turned into strings (``:nemesis`` ->
``"nemesis"``), EDN vectors/lists/sets into lists and maps into dicts.  Ops
without an ``index`` get their position in the file.  JSON object keys of a
``poll`` value that spell integers are turned back into int keys (JSON only
has string keys).

A line that cannot be read raises :class:`HistoryError` whose message starts
with ``file:line:`` and says what was expected, so the CLI can print one line
and exit 2.  One exception: a JSONL last line without its newline that is not
JSON is what a harness killed mid-write leaves; it is skipped with a warning
(the op it held is lost either way) so the rest stays checkable.  EDN is parsed with the ``edn_format`` package; a small bracket
scanner only finds where each top-level op starts, so errors can name a line.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import re
import uuid
from collections.abc import Mapping
from typing import Any, Iterable

OP_TYPES = ("invoke", "ok", "fail", "info")
log = logging.getLogger(__name__)
_INT_KEY = re.compile(r"-?\d+\Z")


class HistoryError(ValueError):
    """A history file that cannot be read; the message is ``file:line: ...``."""


# --------------------------------------------------------------------------
# Shared validation


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _normalize_op(raw: Any, where: str, position: int) -> dict:
    """Check one decoded op and return it as a plain dict (or raise)."""
    if not isinstance(raw, dict):
        raise HistoryError(f"{where}: expected an op map with :type, :process and :f; got {_describe(raw)}")
    op = dict(raw)
    missing = [k for k in ("type", "f") if k not in op]
    if missing:
        raise HistoryError(f"{where}: expected an op with keys type, process and f; missing {', '.join(missing)}")
    if op["type"] not in OP_TYPES:
        raise HistoryError(f"{where}: expected type to be one of {'|'.join(OP_TYPES)}; got {_describe(op['type'])}")
    if not isinstance(op["f"], str):
        raise HistoryError(f"{where}: expected f to be a name (string or keyword); got {_describe(op['f'])}")
    process = op.get("process")
    if process is None or isinstance(process, bool) or not isinstance(process, (int, str)):
        raise HistoryError(f"{where}: expected process to be an integer or a name like nemesis; got {_describe(process)}")
    op.setdefault("value", None)
    op.setdefault("index", position)
    return op


# --------------------------------------------------------------------------
# JSONL


def _int_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {int(k) if isinstance(k, str) and _INT_KEY.match(k) else k: v for k, v in value.items()}
    return value


def _read_jsonl(path: str) -> list[dict]:
    ops: list[dict] = []
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                raw = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as err:
                if not line.endswith("\n"):  # torn last line: the writer died mid-line
                    log.warning("%s: ignoring a torn last line (no newline, not JSON)", where)
                    break
                raise HistoryError(
                    f"{where}: expected one JSON object per line (an op); {err.msg} at column {err.colno}"
                ) from None
            op = _normalize_op(raw, where, len(ops))
            if op["f"] == "poll":
                op["value"] = _int_keys(op["value"])
            ops.append(op)
    return ops


def write_jsonl(ops: Iterable[dict], path: str | os.PathLike) -> None:
    """Write ops one JSON object per line (the harness's own format)."""
    with open(path, "w", encoding="utf-8") as handle:
        for op in ops:
            handle.write(json.dumps(op, separators=(",", ":"), default=str))
            handle.write("\n")


# --------------------------------------------------------------------------
# EDN

_DELIMS = set("()[]{}\";, \t\r\n")


def _edn_elements(text: str) -> tuple[bool, list[tuple[int, int, int]]]:
    """Locate the ops of an EDN history without parsing them.

    Returns ``(wrapped, elements)``: ``wrapped`` is true when the ops sit in one
    top-level vector or list; each element is ``(start, end, line)`` of one op
    form (a ``#_`` discarded form is skipped, a ``#tag`` stays with its form).
    Raises HistoryError on unbalanced brackets.
    """
    elements: list[tuple[int, int, int]] = []
    stack: list[tuple[str, int]] = []
    wrapped = None
    op_depth = 0
    pending_start = None  # (pos, line, discard) of the element being read
    line = 1
    i, n = 0, len(text)
    closers = {")": "(", "]": "[", "}": "{"}

    def begin(pos: int, discard: bool = False) -> None:
        nonlocal pending_start
        if len(stack) == op_depth and pending_start is None:
            pending_start = (pos, line, discard)

    def finish(end: int) -> None:
        nonlocal pending_start
        if pending_start is not None and len(stack) == op_depth:
            start, start_line, discard = pending_start
            pending_start = None
            if not discard:
                elements.append((start, end, start_line))

    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch in " \t\r,":
            i += 1
        elif ch == ";":
            while i < n and text[i] != "\n":
                i += 1
        elif wrapped is None and ch in "[(":
            wrapped, op_depth = True, 1
            stack.append((ch, line))
            i += 1
        elif ch in "([{":
            if wrapped is None:
                wrapped, op_depth = False, 0
            begin(i)
            stack.append((ch, line))
            i += 1
        elif ch in ")]}":
            if not stack or stack[-1][0] != closers[ch]:
                raise HistoryError(f"{{path}}:{line}: expected a balanced EDN form; unexpected {ch!r}")
            stack.pop()
            i += 1
            finish(i)
        elif ch == '"':
            if wrapped is None:
                wrapped, op_depth = False, 0
            begin(i)
            start_line = line
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                elif text[i] == "\n":
                    line += 1
                i += 1
            if i >= n:
                raise HistoryError(f"{{path}}:{start_line}: expected a closing \" for this string")
            i += 1
            finish(i)
        elif ch == "#" and i + 1 < n and text[i + 1] == "_":
            if wrapped is None:
                wrapped, op_depth = False, 0
            begin(i, discard=True)
            i += 2
        elif ch == "#" and i + 1 < n and text[i + 1] == "{":
            if wrapped is None:
                wrapped, op_depth = False, 0
            begin(i)
            stack.append(("{", line))
            i += 2
        elif ch == "#":  # a tag: belongs to the form that follows
            if wrapped is None:
                wrapped, op_depth = False, 0
            begin(i)
            i += 1
            while i < n and text[i] not in _DELIMS:
                i += 1
        else:  # an atom: symbol, keyword, number, nil, char
            if wrapped is None:
                wrapped, op_depth = False, 0
            begin(i)
            if ch == "\\":
                i += 2
            while i < n and text[i] not in _DELIMS:
                i += 1
            finish(i)
    if stack:
        raise HistoryError(f"{{path}}:{stack[-1][1]}: expected a closing bracket for this {stack[-1][0]!r}")
    return bool(wrapped), elements


def _plain(value: Any) -> Any:
    """edn_format's types -> plain Python (keywords become their names)."""
    import edn_format

    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, edn_format.Char):
        return value
    if isinstance(value, edn_format.Keyword):
        return value.name
    if isinstance(value, (edn_format.Symbol, edn_format.Char)):
        return str(value)
    if isinstance(value, Mapping):
        return {_plain_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, edn_format.ImmutableList)):
        return [_plain(v) for v in value]
    if isinstance(value, (frozenset, set)):
        items = [_plain(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value if isinstance(value, (int, float)) else str(value)


def _plain_key(key: Any) -> Any:
    key = _plain(key)
    return tuple(key) if isinstance(key, list) else key


def _parse_edn(source: str, where: str) -> Any:
    import edn_format

    try:
        return edn_format.loads(source)
    except (edn_format.EDNDecodeError, NotImplementedError, ValueError, TypeError) as err:
        raise HistoryError(f"{where}: expected an EDN op map; cannot parse it ({err})") from None


def _read_edn(path: str) -> list[dict]:
    import edn_format

    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        wrapped, elements = _edn_elements(text)
    except HistoryError as err:
        raise HistoryError(str(err).replace("{path}", path)) from None
    forms: list[Any] | None = None
    try:  # fast path: edn_format parses the whole file at once
        parsed = edn_format.loads_all(text)
        if wrapped and len(parsed) == 1 and isinstance(parsed[0], (list, tuple, edn_format.ImmutableList)):
            parsed = list(parsed[0])
        if len(parsed) == len(elements):
            forms = list(parsed)
    except (edn_format.EDNDecodeError, NotImplementedError, ValueError, TypeError):
        forms = None
    if forms is None:  # slow path: parse op by op to name the bad line
        forms = [_parse_edn(text[s:e], f"{path}:{line}") for s, e, line in elements]
    return [
        _normalize_op(_plain(form), f"{path}:{line}", pos)
        for pos, (form, (_, _, line)) in enumerate(zip(forms, elements))
    ]


def _edn_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {_edn_value(k): _edn_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_edn_value(v) for v in value]
    return value


def _edn_op(op: dict) -> dict:
    from edn_format import Keyword

    out = {}
    for key, value in op.items():
        if key in ("type", "f") and isinstance(value, str):
            value = Keyword(value)
        elif key == "process" and isinstance(value, str):
            value = Keyword(value)
        else:
            value = _edn_value(value)
        out[Keyword(key)] = value
    return out


def write_edn(ops: Iterable[dict], path: str | os.PathLike) -> None:
    """Write ops as a Jepsen ``history.edn``: one vector, one op map per line."""
    import edn_format

    with open(path, "w", encoding="utf-8") as handle:
        handle.write("[")
        for number, op in enumerate(ops):
            if number:
                handle.write("\n ")
            handle.write(edn_format.dumps(_edn_op(op)))
        handle.write("]\n")


# --------------------------------------------------------------------------
# Entry point


def read_history(path: str | os.PathLike) -> list[dict]:
    """Read a ``.jsonl`` or ``.edn`` history into plain-dict ops."""
    path = os.fspath(path)
    if path.endswith(".edn"):
        return _read_edn(path)
    if path.endswith((".jsonl", ".json")):
        return _read_jsonl(path)
    raise HistoryError(f"{path}:1: expected a history file ending in .jsonl or .edn")

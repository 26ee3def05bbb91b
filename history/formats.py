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
(the op it held is lost either way) so the rest stays checkable.

JSONL can also be streamed: :func:`iter_jsonl` yields the ops one at a time
(for 10M-op histories headed for Parquet) and says afterwards whether it
skipped a cut-off last line; :func:`read_history` is its list.  EDN: Jepsen's
flat op maps are rewritten into JSON over the file's bytes and decoded by
orjson (:func:`_fast_edn`); everything else is parsed with the ``edn_format``
package, and a small bracket scanner finds where each top-level op starts, so
errors can name a line.
"""
from __future__ import annotations

import contextlib
import datetime
import gc
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Iterable

import orjson

OP_TYPES = ("invoke", "ok", "fail", "info")
log = logging.getLogger(__name__)


class HistoryError(ValueError):
    """A history file that cannot be read; the message is ``file:line: ...``."""


# --------------------------------------------------------------------------
# Shared validation


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_op(op: Any, where: str) -> None:
    """Raise HistoryError naming the first thing wrong with a decoded op, if any."""
    if not isinstance(op, dict):
        raise HistoryError(f"{where}: expected an op map with :type, :process and :f; got {_describe(op)}")
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


def _normalize_op(raw: Any, where: str, position: int) -> dict:
    """Check one decoded op and return it as a plain dict (or raise)."""
    _check_op(raw, where)
    op = dict(raw)
    op.setdefault("value", None)
    op.setdefault("index", position)
    return op


# --------------------------------------------------------------------------
# JSONL


def _int_key(key: Any) -> Any:
    if isinstance(key, str) and (key.isdecimal() or key[:1] == "-" and key[1:].isdecimal()):
        return int(key)
    return key


def _int_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_int_key(k): v for k, v in value.items()}
    return value


class JsonlOps:
    """The ops of one ``history.jsonl``, read lazily, one line at a time.

    Why a class: a caller streaming a 10M-op history (the Spark path) never
    holds the list, yet must learn afterwards whether a cut-off last line was
    skipped (``truncated``), so results.json can say so. Each iteration
    reads the file afresh.
    Lines are decoded with orjson; a line orjson rejects is retried with the
    standard json module, so what is accepted (NaN, big integers) and the
    error messages are the standard library's.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.truncated = False  # set when the iteration skipped a cut-off last line

    def __iter__(self) -> Iterator[dict]:
        decode, position = self.decode, 0
        self.truncated = False
        with open(self.path, "rb") as handle:
            for lineno, line in enumerate(handle, 1):
                op = decode(line, lineno, position)
                if op is not None:
                    position += 1
                    yield op

    def decode(self, line: bytes, lineno: int, position: int) -> dict | None:
        """One line -> its op (None for a blank or cut-off last line), or HistoryError.

        `position` is the op's place among the ops (its index if it has none).
        """
        try:
            op = orjson.loads(line)
        except orjson.JSONDecodeError:
            op = self._slow_decode(line, lineno)
            if op is None:  # a blank line, or the cut-off last line
                return None
        # The common shape, checked without building messages; anything
        # else goes through _check_op for the precise error.
        if type(op) is not dict or op.get("type") not in OP_TYPES \
                or type(op.get("f")) is not str \
                or type(op.get("process")) not in (int, str):
            _check_op(op, f"{self.path}:{lineno}")
        if "value" not in op:
            op["value"] = None
        elif op["f"] == "poll" and type(op["value"]) is dict:
            op["value"] = _int_keys(op["value"])
        if "index" not in op:
            op["index"] = position
        return op

    def _slow_decode(self, line: bytes, lineno: int) -> Any:
        """A line orjson refused: blank, cut off, or one only the json module reads."""
        where = f"{self.path}:{lineno}"
        if not line.strip():
            return None
        try:
            return json.loads(line.rstrip(b"\r\n").decode("utf-8"))
        except UnicodeDecodeError as err:
            problem = f"not UTF-8 text at byte {err.start + 1}"
        except json.JSONDecodeError as err:
            problem = f"{err.msg} at column {err.colno}"
        if not line.endswith(b"\n"):  # torn last line: the writer died mid-line
            log.warning("%s: ignoring a torn last line (no newline, not JSON)", where)
            self.truncated = True
            return None
        raise HistoryError(f"{where}: expected one JSON object per line (an op); {problem}")


def iter_jsonl(path: str | os.PathLike) -> JsonlOps:
    """The ops of a ``history.jsonl`` as a lazy iterable; see :class:`JsonlOps`."""
    return JsonlOps(path)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while a big acyclic list of ops is built.

    Why: every collection rescans all ops read so far, which more than
    doubles the time to read a multi-million-op history into a list.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_jsonl(path: str) -> list[dict]:
    with _gc_paused():
        return list(JsonlOps(path))


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


# Jepsen's flat op maps, the fast path. A history that is a sequence (or one
# vector or list) of op maps whose values are numbers, nil, booleans,
# keywords, one-line strings (escapes \" \\ \n \t \r), and vectors or lists of those
# is rewritten into JSON by a few whole-buffer passes over its bytes (regular
# expressions, bytes.translate/split/join/replace: C speed, no Python call per
# token) and decoded by orjson. The map keys become JSON object keys when the
# history's key names are never used as values (they are not in Jepsen's op
# maps): orjson then builds the dicts itself; JSON's grammar (a key needs its
# colon, a value may not have one) makes any other use of those names invalid
# JSON, and the second rewrite (every map a JSON array of key, value, ...)
# reads it instead.
# Hand-written rather than a library because it is what makes reading Jepsen
# histories cheap: PyPI's EDN readers (edn_format, the best kept) are pure
# Python; measured on the Knossos corpus (122 files, 48,500 ops;
# bench/knossos_read_check.py) this reads in ~0.07 CPU-s what edn_format
# reads in ~6 CPU-s (and the former regex-over-str version of this path in
# ~0.29), with equal results on every file (a test). Anything else -- sets,
# tags, nested maps, symbols, characters, ratios, N/M numbers, escapes -- is
# refused up front or makes the JSON invalid, and edn_format reads the file.
_EDN_STRING = re.compile(rb'"(?:[^"\\\n\x00]|\\["\\ntr])*"')  # EDN escapes JSON shares
_EDN_COMMENT = re.compile(rb";[^\n]*")
_EDN_KEYWORD = re.compile(rb":([A-Za-z*+!_?<>=.\-][A-Za-z0-9*+!_?<>=.\-]*)(?=[,\]}])")
_EDN_NIL = re.compile(rb"(?<=[,\[{])nil(?=[,\]}])")
# ( ) become [ ]; commas and whitespace become spaces (bytes.split drops them)
_EDN_SEPARATORS = bytes.maketrans(b"(),\t\r\n\f\v", b"[]      ")
_EDN_ARRAY_MAPS = bytes.maketrans(b"{}", b"[]")
_OP_TYPE_SET = frozenset(OP_TYPES)
_SAMPLE_MAPS = 64  # ops whose keys decide whether map keys become JSON object keys


def _fast_edn(text: str | bytes) -> list[dict] | None:
    """The ops of a flat Jepsen history, or None when the fast path does not apply."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if b"\x00" in data:
        return None
    strings = _EDN_STRING.findall(data)
    code = _EDN_STRING.sub(b"\x00", data) if strings else data
    if b'"' in code or b"#" in code or b"\\" in code:  # escapes, sets, tags, characters
        return None
    if b";" in code:
        code = _EDN_COMMENT.sub(b"", code)
    maps = code.count(b"{")
    head = code.lstrip(b" \t\r\n,")[:1]
    # Whitespace and commas between tokens become one comma (bytes.split is C
    # speed), so every token ends at a comma or a closing bracket.
    code = b"[" + b",".join(code.translate(_EDN_SEPARATORS).split()) + b"]"
    for pair in (b"[,", b"{,"):
        code = code.replace(pair, pair[:1])
    for pair in (b",]", b",}"):
        code = code.replace(pair, pair[1:])
    # Every keyword :name becomes "name" in one regex pass: split() keeps the
    # names (the group) between the pieces around them, and '"' joins them.
    code = b'"'.join(_EDN_KEYWORD.split(code))
    if b":" in code:  # a keyword the pattern does not take (namespaced, odd characters)
        return None
    nils = code.count(b"nil")
    if nils and nils != sum(code.count(b + b"nil") for b in (b",", b"[", b"{")):
        code = _EDN_NIL.sub(b"null", code)  # a keyword with nil in its name: bare nils only
    elif nils:  # every nil is a bare nil (a delimiter before it)
        code = code.replace(b"nil", b"null")
    forms = _edn_json_objects(code, strings)
    if forms is None:
        forms = _edn_json_arrays(code, strings)
    if forms is None:
        return None
    return _flat_ops(forms, head, maps)


def _native_edn(data: bytes) -> list[dict] | None:
    """The ops of a flat Jepsen history through the C pass (history/native.c), which
    rewrites it into JSON and does what `_flat_ops` does (checks each op, adds a
    missing value and index) as it goes: orjson's dicts are the ops. None when it
    does not apply (no library, anything but flat op maps)."""
    from history import native

    converted = native.edn_json(data)
    if converted is None:
        return None
    code, maps, depth = converted
    # The cyclic garbage collector paused while orjson builds the ops (dicts and lists
    # that hold no cycles): otherwise its collections, triggered every 700 new
    # containers and walking every older one, were a third of reading the Knossos
    # corpus (bench/knossos_read_check.py, median of warm reads 0.080 -> 0.052 CPU-s).
    collecting = gc.isenabled()
    gc.disable()
    try:
        forms = orjson.loads(code)
    except orjson.JSONDecodeError:
        return None
    finally:
        code.release()
        if collecting:
            _promote_young()
            gc.enable()
    return forms[0] if depth == 2 else forms


def _promote_young() -> None:
    """Move the young generations' objects (the ops just built) to the oldest, untraversed.

    Why: with the collector paused, the ops still count as new containers, and the
    first allocation after it resumes starts a young collection that walks every one
    of them (and moves them up, to be walked again a generation later): the warm
    median of the Knossos corpus was 0.044 CPU-s with that, 0.030 without
    (bench/knossos_read_check.py). gc.freeze() then gc.unfreeze() splices the
    generations' lists into the oldest one and resets the young count, in constant
    time; the ops are then walked only by full collections, like any long-lived data.
    Skipped when the process froze objects of its own (unfreeze would release them;
    get_freeze_count() walks them, once per file). Other young objects of the caller
    move up too: a cycle among them is freed at the next full collection instead of
    a young one.
    """
    if not gc.get_freeze_count():
        gc.freeze()
        gc.unfreeze()


def _flat_ops(forms: list, head: bytes, maps: int) -> list[dict] | None:
    """The decoded forms as ops, when they are a sequence (or one vector or list) of
    op maps and nothing else; `head` is the file's first byte of code, `maps` its
    number of maps."""
    if head in (b"[", b"("):  # one vector or list of ops
        if len(forms) != 1 or type(forms[0]) is not list:
            return None
        forms = forms[0]
    elif head != b"{":
        return None
    if len(forms) != maps:  # a map inside an op, or something that is not a map
        return None
    if {type(form) for form in forms} - {dict} \
            or {op.get("type") for op in forms} - _OP_TYPE_SET \
            or {type(op.get("f")) for op in forms} - {str} \
            or {type(op.get("process")) for op in forms} - {int, str}:
        return None  # not all ops, or a bad op: the slow path says where
    for op in forms:
        if "value" not in op:
            op["value"] = None
    for position, op in enumerate(forms):
        if "index" not in op:
            op["index"] = position
    return forms


def _with_strings(code: bytes, strings: list[bytes]) -> bytes:
    """Put the string literals back: they are JSON literals as they stand."""
    if not strings:
        return code
    pieces = code.split(b"\x00")
    return b"".join([piece + string for piece, string in zip(pieces, strings + [b""])])


def _edn_json_objects(code: bytes, strings: list[bytes]) -> list | None:
    """Maps as JSON objects: the first ops' keys (names never used as values there)
    get a colon instead of their comma everywhere; None when that does not make
    valid JSON. (A key that was an EDN string, not a keyword, is still a string
    placeholder at this point: its map stays invalid JSON and goes the other way.)"""
    cut = 0
    for _ in range(_SAMPLE_MAPS):
        found = code.find(b"}", cut) + 1
        if not found:  # fewer ops than that: all of them
            cut = len(code)
            break
        cut = found
    prefix = code[:cut]
    if prefix.count(b"{") != prefix.count(b"}"):  # cut inside a map
        return None
    prefix += b"]" * (prefix.count(b"[") - prefix.count(b"]"))
    sample = _edn_json_arrays(prefix, strings[:prefix.count(b"\x00")])
    if not sample:
        return None
    if len(sample) == 1 and type(sample[0]) is list:  # one vector of ops
        sample = sample[0]
    keys: set[str] = set()
    values: set[str] = set()
    for form in sample:
        if type(form) is not dict:
            return None
        keys.update(form)
        values.update(v for v in form.values() if type(v) is str)
    if not all(type(k) is str for k in keys) or keys & values:
        return None
    for key in keys:
        quoted = b'"' + key.encode() + b'"'
        code = code.replace(quoted + b",", quoted + b":")
    try:
        return orjson.loads(_with_strings(code, strings))
    except orjson.JSONDecodeError:
        return None


def _edn_json_arrays(code: bytes, strings: list[bytes]) -> list | None:
    """Maps as JSON arrays of key, value, ... turned into dicts; None when not JSON."""
    try:
        forms = orjson.loads(_with_strings(code.translate(_EDN_ARRAY_MAPS), strings))
    except orjson.JSONDecodeError:
        return None
    out = []
    for form in forms:
        if type(form) is list and form and type(form[0]) is list:  # one vector of ops
            form = [_pairs(op) for op in form]
            if any(op is None for op in form):
                return None
            out.append(form)
            continue
        op = _pairs(form)
        if op is None:
            return None
        out.append(op)
    return out


def _pairs(form: Any) -> dict | None:
    if type(form) is not list or len(form) % 2:
        return None
    pairs = iter(form)
    try:
        return dict(zip(pairs, pairs))
    except TypeError:  # an unhashable key
        return None


def _read_edn(path: str) -> list[dict]:
    with open(path, "rb") as handle:
        data = handle.read()
    fast = _native_edn(data)
    if fast is None:
        fast = _fast_edn(data)
    if fast is not None:
        return fast
    return _read_edn_slow(path, data.decode("utf-8"))


def _read_edn_slow(path: str, text: str) -> list[dict]:
    """edn_format for everything the fast path refuses, with file:line errors."""
    import edn_format

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
        elif key == "value" and _is_micro_ops(op):
            value = [[Keyword(mop[0]), *(_edn_value(x) for x in mop[1:])] for mop in value]
        else:
            value = _edn_value(value)
        out[Keyword(key)] = value
    return out


def _is_micro_ops(op: dict) -> bool:
    """A queue op whose value is Jepsen's micro-ops ([["send", k, v], ["poll", {...}]]): their
    names go back to keywords (:send, :poll), as Jepsen's checker reads them."""
    value = op.get("value")
    return op.get("f") in ("txn", "send", "poll") and isinstance(value, list) and bool(value) and all(
        isinstance(mop, list) and mop and mop[0] in ("send", "poll") for mop in value)


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

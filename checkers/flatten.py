"""Flatten a history and replica dumps into narrow tables, the input of both drivers.

Why: the anomaly kernel runs twice, as plain Python (small runs) and as Spark
DataFrame jobs (big runs and campaigns). Both read the same flat rows, so the
per-op bookkeeping that is inherently sequential (pairing an invocation with
its completion, numbering a consumer's sessions) happens once, here, in one
streaming pass, and the two drivers only have to agree on set and window logic.

Tables (column order is the Parquet schema, see `checkers.parquet`):

sends: one row per send invocation
    key, value (canonical JSON text), offset (ok only, else None),
    type ("ok" | "fail" | "info"; an invocation that never completed is "info"),
    process, invoke_index, complete_index (None if it never completed)
reads: one row per [offset, value] pair of an ok poll
    key, offset, value (canonical JSON text), process, index (the poll's
    completion index), pos (position of the pair within the poll's list for
    that key), session (an integer naming one consumer sequence, see below),
    invoke_index (the poll's invocation), final (read in the final phase)
ends: one row per key read in the final phase
    key, end_offset (the log's length: where the final consumer stood after
    its last poll of the key), invoke_index, complete_index (of that poll).
    The final phase reads each key to its end (workloads/log.py stops at an
    empty poll at the end; other readers stop when their position reaches the
    end offset); a key without this row was not read after the final heal
    (the run was interrupted before the final phase), so nothing that needs
    the end of the log can be decided for it.

records: one row per record of a replica dump (docs/interfaces.md, Dump)
    node, key (partition), offset, epoch, value (canonical JSON text)
replicas: one row per partition of a replica dump
    node, key, hw, leo, log_start

A *session* is a run of one process's polls over which offsets must advance:
it ends when the process reassigns or resets its consumer (an op with f in
RESET_FS) and at the final phase (the nemesis op with f "final"), after which
final polls re-read every key from the start.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterable, Iterator

SEND_COLUMNS = ("key", "value", "offset", "type", "process", "invoke_index", "complete_index")
READ_COLUMNS = ("key", "offset", "value", "process", "index", "pos", "session", "invoke_index",
                "final")
END_COLUMNS = ("key", "end_offset", "invoke_index", "complete_index")
RECORD_COLUMNS = ("node", "key", "offset", "epoch", "value")
REPLICA_COLUMNS = ("node", "key", "hw", "leo", "log_start")
RESET_FS = frozenset({"assign", "subscribe", "seek", "crash", "reset"})


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def encode_value(value) -> str:
    """Canonical JSON text of a record value: the join key for equality everywhere.

    An int (the harness workload's values) is its own text; one shared encoder
    for the rest (json.dumps with options builds a new encoder per call).
    """
    if type(value) is int:
        return str(value)
    return _CANONICAL.encode(value)


def decode_value(text: str):
    return json.loads(text)


class Flattener:
    """Streaming flattener: feed ops in history order, collect rows as they are final."""

    def __init__(self) -> None:
        self.pending: dict[str, dict] = {}  # process -> open send invocation
        self.resets: Counter = Counter()    # process -> consumer resets so far
        self.final_phase = 0
        self.sessions: dict[tuple, int] = {}
        self.stats: Counter = Counter()
        self.poll_invokes: dict[str, int] = {}  # process -> open poll invocation index
        self.final_position: dict[tuple, int] = {}  # (session, key) -> next offset, final phase
        self.last_final: dict[int, tuple] = {}  # key -> end row after its last final poll

    def session_of(self, process: str) -> int:
        marker = (process, self.resets[process], self.final_phase)
        return self.sessions.setdefault(marker, len(self.sessions))

    def feed(self, op: dict) -> tuple[list[tuple], list[tuple]]:
        """Consume one op; return (send rows, read rows) that it completes."""
        self.stats["ops"] += 1
        kind = op.get("type")
        self.stats[kind] += 1
        process = str(op.get("process"))
        f = op.get("f")
        index = op["index"]
        if process == "nemesis":
            if f == "final":
                self.final_phase = 1
            return [], []
        if f in RESET_FS and kind != "invoke":
            self.resets[process] += 1
            return [], []
        if f == "send":
            return self._send(op, process, kind, index), []
        if f == "poll":
            if kind == "invoke":
                self.poll_invokes[process] = index
                return [], []
            invoke_index = self.poll_invokes.pop(process, index)
            if kind == "ok":
                if self.final_phase:
                    self._final_poll(op, process, index, invoke_index)
                return [], self._poll(op, process, index, invoke_index)
        return [], []

    def _final_poll(self, op, process, index, invoke_index) -> None:
        """Follow the final consumer's position per key: after its last poll, the end."""
        session = self.session_of(process)
        for key, pairs in (op.get("value") or {}).items():
            stream = (session, int(key))
            if pairs:
                self.final_position[stream] = int(pairs[-1][0]) + 1
            end = self.final_position.get(stream, 0)
            self.last_final[int(key)] = (int(key), end, invoke_index, index)

    def ends(self) -> list[tuple]:
        """End rows (END_COLUMNS) of the keys read in the final phase."""
        return sorted(self.last_final.values())

    def _send(self, op, process, kind, index) -> list[tuple]:
        if kind == "invoke":
            stale = self.pending.pop(process, None)
            self.pending[process] = op
            return [self._open_send_row(stale)] if stale is not None else []
        invoke = self.pending.pop(process, None)
        value = op.get("value")
        key, sent, offset = _parse_send_value(value)
        if invoke is not None:
            key, sent = invoke["value"][0], invoke["value"][1]
        if key is None:
            return []
        invoke_index = invoke["index"] if invoke is not None else index
        return [(int(key), encode_value(sent), offset if kind == "ok" else None,
                 kind, process, invoke_index, index)]

    def _poll(self, op, process, index, invoke_index) -> list[tuple]:
        session = self.session_of(process)
        final = bool(self.final_phase)
        rows = []
        for key in sorted((op.get("value") or {}), key=int):
            for pos, (offset, value) in enumerate(op["value"][key]):
                rows.append((int(key), int(offset), encode_value(value), process, index, pos, session,
                             invoke_index, final))
        return rows

    @staticmethod
    def _open_send_row(invoke: dict) -> tuple:
        key, value = invoke["value"][0], invoke["value"][1]
        return (int(key), encode_value(value), None, "info", str(invoke.get("process")),
                invoke["index"], None)

    def finish(self) -> list[tuple]:
        """Sends still open at the end of the history: indefinite, like info."""
        rows = [self._open_send_row(op) for op in self.pending.values()]
        self.pending.clear()
        return rows


def _parse_send_value(value):
    """-> (key, value, offset) from a send completion's value, tolerating shapes."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None, None, None
    key, body = value
    if isinstance(body, (list, tuple)) and len(body) == 2:
        return key, body[1], body[0]
    return key, body, None


class Flat(tuple):
    """(sends, reads, stats) of a whole history, plus `ends` (END_COLUMNS rows)."""

    ends: list[tuple]


def flatten(ops: Iterable[dict]) -> Flat:
    """Whole-history flattening for the in-process driver: (sends, reads, stats); .ends."""
    sends, reads = [], []
    for send_rows, read_rows in iter_flat(ops, flattener := Flattener()):
        sends.extend(send_rows)
        reads.extend(read_rows)
    sends.extend(flattener.finish())
    flat = Flat((sends, reads, history_stats(flattener.stats)))
    flat.ends = flattener.ends()
    return flat


def iter_flat(ops: Iterable[dict], flattener: Flattener) -> Iterator[tuple[list, list]]:
    for op in ops:
        yield flattener.feed(op)


def history_stats(counter: Counter) -> dict:
    return {"ops": counter["ops"], "invoke": counter["invoke"], "ok": counter["ok"],
            "fail": counter["fail"], "info": counter["info"]}


def dump_rows(node: str, dump: dict) -> tuple[list[tuple], list[tuple]]:
    """One replica's dump -> (record rows, replica rows). One topic per test: key = partition."""
    records, replicas = [], []
    for part in dump.get("partitions", []):
        key = int(part["partition"])
        replicas.append((node, key, int(part["hw"]), int(part["leo"]), int(part.get("log_start", 0))))
        for offset, epoch, _crc, value in part.get("records", []):
            records.append((node, key, int(offset), int(epoch), encode_value(value)))
    return records, replicas


def flatten_dumps(dumps: dict[str, dict]) -> tuple[list[tuple], list[tuple]]:
    """All dumps (node -> Dump response) -> (records, replicas)."""
    records, replicas = [], []
    for node in sorted(dumps):
        more_records, more_replicas = dump_rows(node, dumps[node])
        records.extend(more_records)
        replicas.extend(more_replicas)
    return records, replicas

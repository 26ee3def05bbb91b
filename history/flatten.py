"""Flatten a history and replica dumps into narrow tables, the input of both drivers.

Why: the anomaly kernel runs twice, as plain Python (small runs) and over column arrays
in Spark's tasks (big runs and campaigns). Both read the same flat rows, so the
per-op bookkeeping that is inherently sequential (pairing an invocation with
its completion, numbering a consumer's sessions) happens once, here, in one
streaming pass, and the two drivers only have to agree on set and window logic.

Tables (column order is the Parquet schema, see `history.parquet`):

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
    its last poll of the key), invoke_index, complete_index (of that poll),
    absent (the system's answer when the final phase found the key's log gone:
    a final poll recorded with `"absent": {key: answer}`, workloads/log.py;
    else None). The log checker counts every acknowledged send to such a key
    as lost (`checkers.log_anomalies`, both engines).
    The final phase reads each key to its end (workloads/log.py stops at an
    empty poll at the end; other readers stop when their position reaches the
    end offset); a key without this row was not read after the final heal
    (the run was interrupted before the final phase), so nothing that needs
    the end of the log can be decided for it.

records: one row per record of a replica dump (docs/interfaces.md, Dump)
    node, key (partition), offset, epoch, value (canonical JSON text)
replicas: one row per partition of a replica dump
    node, key, hw, leo, log_start

A *session* numbers one consumer stream: the reads of one process over which
a key's offsets must advance. Sessions are per (process, key), as Kafka's
consumer positions are per partition:

- an assign or subscribe (f in REASSIGN_FS, ok or info, value: the keys)
  keeps the stream of every key it names, so a later poll of such a key that
  goes back is nonmonotonic-poll and one that jumps ahead is poll-skip (Kafka's
  `assign()` keeps the position of partitions that stay assigned; a group
  member resumes from its committed offset). Keys it drops start afresh.
  This is Jepsen's rule too (`poll-skip+nonmonotonic-cases-per-process`
  keeps `(select-keys last-reads (:value op))`). A failed one changes nothing;
- a seek, an explicit reset or a crash (FULL_RESET_FS, any completion) and a
  reassignment without a key list start every key afresh;
- the final phase (the nemesis op with f "final") starts every key afresh:
  final polls re-read every key from the start.

Sends are not sessions: a process's sends are ordered whatever its consumer
does (`checkers.log_anomalies`, nonmonotonic-send).

Ops come in the harness's shape (a send's value `[key, value]`, completed as
`[key, [offset, value]]`; a poll's `{key: [[offset, value], ...]}`) or in
Jepsen's queue shape, as Jepsen's `history.edn` has them: a send's value a
list of micro-ops `[["send", key, value], ...]` (completed with
`[offset, value]` in place of the value; one op may send to several keys), a
poll's `[["poll", {key: pairs}], ...]` (invoked as `[["poll"]]`), and `txn`
ops that mix both. Every send micro-op is one send row of its op.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterable, Iterator

from harness.run_store import PAST_MARK
from history import micro_ops

SEND_COLUMNS = ("key", "value", "offset", "type", "process", "invoke_index", "complete_index")
READ_COLUMNS = ("key", "offset", "value", "process", "index", "pos", "session", "invoke_index",
                "final")
END_COLUMNS = ("key", "end_offset", "invoke_index", "complete_index", "absent")
RECORD_COLUMNS = ("node", "key", "offset", "epoch", "value")
REPLICA_COLUMNS = ("node", "key", "hw", "leo", "log_start")
REASSIGN_FS = frozenset({"assign", "subscribe"})
FULL_RESET_FS = frozenset({"seek", "crash", "reset"})
RESET_FS = REASSIGN_FS | FULL_RESET_FS
DATA_FS = ("send", "poll", "txn")  # ops that carry sends or reads


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
        self.resets: Counter = Counter()    # process -> consumer resets and reassignments so far
        self.kept: dict[str, dict[int, int]] = {}  # process -> key -> session a reassignment kept
        self.final_phase = 0
        self.sessions: dict[tuple, int] = {}
        self.stats: Counter = Counter()
        self.poll_invokes: dict[str, int] = {}  # process -> open poll invocation index
        self.final_position: dict[tuple, int] = {}  # (session, key) -> next offset, final phase
        self.last_final: dict[int, tuple] = {}  # key -> end row after its last final poll
        self.subscribed: set[str] = set()  # processes that joined a consumer group

    def session_of(self, process: str) -> int:
        """The process's session of every key no reassignment kept (numbered on first use)."""
        marker = (process, self.resets[process], self.final_phase)
        return self.sessions.setdefault(marker, len(self.sessions))

    def stream_session(self, process: str, key: int, session: int) -> int:
        """The session of one (process, key) stream: the one a reassignment kept, else the
        process's `session` (numbered for every ok poll, even an empty one, as a run of
        lines numbers it: `history.flatten_runs`)."""
        kept = self.kept.get(process)
        if kept:
            return kept.get(key, session)
        return session

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
                self.kept.clear()
            return [], []
        if f in RESET_FS and kind != "invoke":
            self._reset(process, f, kind, op)
            return [], []
        if micro_ops.is_other_workloads(op):   # a register or list-append txn: no queue data
            return [], []
        if f in DATA_FS and micro_ops.is_micro_ops(op):
            micro_ops.check(op)
        try:
            if f == "send":
                return self._send(op, process, kind, index), []
            if f == "poll":
                return [], self._poll_op(op, process, kind, index)
            if f == "txn":
                return self._send(op, process, kind, index), self._poll_op(op, process, kind, index)
        except (TypeError, ValueError):
            raise ValueError(
                f"op {index} ({f}): expected integer keys (partitions) and offsets, as the harness "
                f"and Jepsen's Kafka workload write them; got {str(op.get('value'))[:80]}") from None
        return [], []

    def _reset(self, process: str, f: str, kind: str, op: dict) -> None:
        """A completed reassignment keeps the streams of the keys it names; anything else
        (a seek, reset, crash, or a reassignment that seeks or names no keys) ends them all."""
        if f in REASSIGN_FS and kind == "fail":
            return  # the consumer kept its assignment
        if f == "subscribe":
            self.subscribed.add(process)
        elif f == "assign" and kind == "ok" and process in self.subscribed:
            self.stats["rebalances"] += 1  # a group member given its keys
        keys = _keys(op.get("value")) if f in REASSIGN_FS and not op.get("seek-to-beginning?") else None
        kept = {}
        if keys:
            current = self.kept.get(process, {})
            base = self.sessions.get((process, self.resets[process], self.final_phase))
            for key in keys:
                session = current.get(key, base)
                if session is not None:
                    kept[key] = session
        self.resets[process] += 1
        if kept:
            self.kept[process] = kept
            # Numbered now, not at its first poll: a run of lines (`history.flatten_runs`)
            # numbers a process's session before it looks at the keys, and must agree.
            self.session_of(process)
        else:
            self.kept.pop(process, None)

    def _poll_op(self, op, process, kind, index) -> list[tuple]:
        if kind == "invoke":
            self.poll_invokes[process] = index
            return []
        invoke_index = self.poll_invokes.pop(process, index)
        if kind != "ok":
            return []
        polled = poll_value(op.get("value"))
        if self.final_phase:
            self._final_poll(polled, process, index, invoke_index)
            self._final_absent(op.get("absent"))
        return self._poll(polled, process, index, invoke_index)

    def _final_poll(self, polled: dict, process, index, invoke_index) -> None:
        """Follow the final consumer's position per key: after its last poll, the end."""
        session = self.session_of(process)
        for key, pairs in polled.items():
            stream = (self.stream_session(process, int(key), session), int(key))
            if pairs:
                self.final_position[stream] = int(pairs[-1][0]) + 1
            end = self.final_position.get(stream, 0)
            self.last_final[int(key)] = (int(key), end, invoke_index, index, None)

    def _final_absent(self, marks) -> None:
        """A final poll that found keys' logs gone (`absent`: key -> the system's answer)."""
        if not isinstance(marks, dict):
            return
        for key, why in marks.items():
            row = self.last_final.get(int(key))
            if row is not None:
                self.last_final[int(key)] = (*row[:4], str(why))

    def ends(self) -> list[tuple]:
        """End rows (END_COLUMNS) of the keys read in the final phase."""
        return sorted(self.last_final.values())

    def _send(self, op, process, kind, index) -> list[tuple]:
        if kind == "invoke":
            stale = self.pending.pop(process, None)
            self.pending[process] = op
            return self._open_send_rows(stale) if stale is not None else []
        invoke = self.pending.pop(process, None)
        acked = sends_of(op.get("value"))
        sent = sends_of(invoke["value"], completed=False) if invoke is not None else acked
        invoke_index = invoke["index"] if invoke is not None else index
        rows = []
        for i, (key, value, _) in enumerate(sent):
            offset = acked[i][2] if kind == "ok" and i < len(acked) else None
            rows.append((int(key), encode_value(value), offset, kind, process, invoke_index, index))
        return rows

    def _poll(self, polled: dict, process, index, invoke_index) -> list[tuple]:
        final = bool(self.final_phase)
        process_session = self.session_of(process)
        rows = []
        for key in sorted(polled, key=int):
            session = self.stream_session(process, int(key), process_session)
            for pos, (offset, value) in enumerate(polled[key]):
                rows.append((int(key), int(offset), encode_value(value), process, index, pos, session,
                             invoke_index, final))
        return rows

    @staticmethod
    def _open_send_rows(invoke: dict) -> list[tuple]:
        """An invocation that never completed: one indefinite row per value it sends."""
        return [(int(key), encode_value(value), None, "info", str(invoke.get("process")),
                 invoke["index"], None) for key, value, _ in sends_of(invoke["value"], completed=False)]

    def finish(self) -> list[tuple]:
        """Sends still open at the end of the history: indefinite, like info."""
        rows = [row for op in self.pending.values() for row in self._open_send_rows(op)]
        self.pending.clear()
        return rows


def _keys(value) -> list[int] | None:
    """The keys a reassignment names, or None when it names none we can read."""
    if not isinstance(value, (list, tuple)):
        return None
    try:
        return [int(key) for key in value if not isinstance(key, bool)]
    except (TypeError, ValueError):
        return None


def sends_of(value, completed: bool = True) -> list[tuple]:
    """[(key, value, offset or None)] of a send op's value, in either shape (see the module
    docstring); [] for a value of neither shape. An invocation's (completed False) values
    are taken whole: only a completion carries [offset, value]."""
    if not isinstance(value, (list, tuple)) or not value:
        return []
    if isinstance(value[0], (list, tuple)):  # Jepsen's micro-ops: [["send", k, v], ...]
        mops = [mop[1:] for mop in value if isinstance(mop, (list, tuple)) and len(mop) == 3
                and mop[0] == "send" and mop[1] is not None]
    elif len(value) == 2 and value[0] is not None:
        mops = [value]
    else:
        return []
    if not completed:
        return [(key, body, None) for key, body in mops]
    return [_parse_send_value(mop) for mop in mops]


def poll_value(value) -> dict:
    """{key: [[offset, value], ...]} of a poll's completion, in either shape; micro-ops
    that poll one key twice are joined in order."""
    if isinstance(value, dict):
        return value
    out: dict = {}
    if isinstance(value, (list, tuple)):  # Jepsen's micro-ops: [["poll", {k: pairs}], ...]
        for mop in value:
            if isinstance(mop, (list, tuple)) and len(mop) == 2 and mop[0] == "poll" \
                    and isinstance(mop[1], dict):
                for key, pairs in mop[1].items():
                    out.setdefault(int(key), []).extend(pairs or [])
    return out


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
    """Op counts by type; `rebalances` (assignments a consumer group gave a subscribed
    process: its ok `assign` ops) when there were any."""
    stats = {"ops": counter["ops"], "invoke": counter["invoke"], "ok": counter["ok"],
             "fail": counter["fail"], "info": counter["info"]}
    if counter["rebalances"]:
        stats["rebalances"] = counter["rebalances"]
    return stats


def dump_rows(node: str, dump: dict) -> tuple[list[tuple], list[tuple]]:
    """One replica's dump -> (record rows, replica rows). One topic per test: key = partition."""
    records, replicas = [], []
    for part in dump.get("partitions", []):
        key = int(part["partition"])
        replicas.append((node, key, int(part["hw"]), int(part["leo"]), int(part.get("log_start", 0))))
        for offset, epoch, _crc, value in part.get("records", []):
            records.append((node, key, int(offset), int(epoch), encode_value(value)))
    return records, replicas


def is_past(node: str) -> bool:
    """A past copy ("n1@past2", harness.run_store.read_past_copies): a node's replica as it was
    before a restart. It counts for divergence only: what it held may since have been
    removed legitimately (an uncommitted tail) or its loss is reported by the final dumps."""
    return PAST_MARK in node


def flatten_dumps(dumps: dict[str, dict]) -> tuple[list[tuple], list[tuple]]:
    """All dumps (node -> Dump response) -> (records, replicas)."""
    records, replicas = [], []
    for node in sorted(dumps):
        more_records, more_replicas = dump_rows(node, dumps[node])
        records.extend(more_records)
        replicas.extend(more_replicas)
    return records, replicas

"""The Flattener's bookkeeping over a run of scanned lines at once (numpy), same rows.

Why: after parsing, the per-op Python bookkeeping (pairing an invocation
with its completion, numbering sessions, counting each stream's reads) was
the other half of the conversion's cost. A run is a stretch of a block's
lines (`history.jsonl_scan`) holding no op that changes a session or the
phase (a reset, the nemesis "final" op) and no op the scanner could not
prove; within it every stream's session and the phase are constant, so the
bookkeeping becomes sorts and cumulative sums (a process's session, with the
keys a reassignment kept put back: `_kept_sessions`). The state carried between
runs is the reference Flattener's own (pending, poll_invokes, sessions,
streams, final_position, last_final, stats), so runs and single ops
fed to the reference code can alternate in any order and give its rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history import native
from history.flatten import encode_value
from history.jsonl_scan import INVOKE, OK, OTHER, POLL, SEND, TYPE_NAMES, Block, ranges
from history.column_flatten import ColumnFlattener

_TYPE_TEXT = pa.array(TYPE_NAMES)


def stable_order(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable"), by a radix sort when the values span less
    than 2**16 (processes, sessions, keys and lines of a run nearly always do):
    numpy sorts 16-bit integers by radix, ~8x faster than int64 here."""
    if len(values):
        low = int(values.min())
        if int(values.max()) - low < 1 << 16:  # Python ints: no int64 overflow
            return np.argsort((values - low).astype(np.uint16), kind="stable")
    return np.argsort(values, kind="stable")


def _unique(values: np.ndarray):
    """np.unique(values, return_index=True, return_inverse=True), by stable_order."""
    order = stable_order(values)
    ordered = values[order]
    new = np.ones(len(order), bool)
    new[1:] = ordered[1:] != ordered[:-1]
    which = np.empty(len(order), np.int64)
    which[order] = np.cumsum(new) - 1
    return ordered[new], order[new], which


def _same_process(process: np.ndarray):
    """-> (previous op of the same process or -1, each process's first op, its last op)."""
    order = stable_order(process)
    ordered = process[order]
    new = np.ones(len(order), bool)
    new[1:] = ordered[1:] != ordered[:-1]
    last = np.ones(len(order), bool)
    last[:-1] = new[1:]
    previous = np.empty(len(order), np.int64)
    previous[order] = np.where(new, -1, np.roll(order, 1))
    return previous, order[new], order[last]


def _pairing(block: Block, lines: np.ndarray):
    """Of some lines' ops (all sends or all polls): process, type, index, each
    process's first and last op, which are invocations, the previous op of the
    same process (0 if none) and whether that one is an invocation."""
    process, kind, index = block.process[lines], block.type[lines], block.index[lines]
    previous, firsts, lasts = _same_process(process)
    invoke = kind == INVOKE
    prev = np.maximum(previous, 0)
    return process, kind, index, firsts, lasts, invoke, prev, (previous >= 0) & invoke[prev]


class RunFlattener(ColumnFlattener):
    """A ColumnFlattener that also takes runs of scanned lines (feed_run)."""

    def feed_run(self, block: Block, lo: int, hi: int) -> tuple[dict | None, dict | None]:
        """Consume the proven lines lo..hi-1 of a block (no active OTHER line among
        them; inert ones are counted by the caller); -> (send columns, read
        columns) they complete, each None if there are none."""
        kind = block.kind[lo:hi]
        lines = np.flatnonzero(kind != OTHER) + lo
        types = np.bincount(block.type[lines], minlength=4)
        self.stats["ops"] += len(lines)
        for code, name in enumerate(TYPE_NAMES):
            self.stats[name] += int(types[code])
        sends = self._sends(block, lines[block.kind[lines] == SEND])
        reads = self._polls(block, lines[block.kind[lines] == POLL], lo, hi)
        return sends, reads

    def _sends(self, block: Block, lines: np.ndarray) -> dict | None:
        if not len(lines):
            return None
        process, kind, index, firsts, lasts, invoke, prev, after_invoke = _pairing(block, lines)
        # Invocations left open before the run: the reference's rows, at the first op.
        extra, handled = [], np.zeros(len(lines), bool)
        for at in firsts.tolist():
            stale = self.pending.pop(str(process[at]), None)
            if stale is None:
                continue
            if invoke[at]:
                extra.extend((at,) + row for row in self._open_send_rows(stale))
                continue
            handled[at] = True
            own_offset = int(block.send_offset[lines[at]]) if block.send_has_offset[lines[at]] else None
            extra.append((at, int(stale["value"][0]), encode_value(stale["value"][1]),
                          own_offset if kind[at] == OK else None, TYPE_NAMES[kind[at]],
                          str(process[at]), stale["index"], int(index[at])))
        done = np.flatnonzero(~invoke & ~handled)          # completions: one row each
        stale = np.flatnonzero(invoke & after_invoke)       # an invocation invoked over
        source = np.where(after_invoke[done], prev[done], done)  # where key and value come from
        src_lines = np.concatenate((lines[source], lines[prev[stale]]))
        offset = np.concatenate((block.send_offset[lines[done]], np.zeros(len(stale), np.int64)))
        no_offset = np.concatenate((~block.send_has_offset[lines[done]] | (kind[done] != OK),
                                    np.ones(len(stale), bool)))
        columns = {
            "key": block.send_key[src_lines],
            "value": block.send_value.take(pa.array(src_lines)),
            "offset": pa.array(offset, pa.int64(), mask=no_offset),
            "type": _TYPE_TEXT.take(pa.array(np.concatenate((kind[done], np.full(len(stale), 3))))),
            "process": block.process_text.take(pa.array(np.concatenate((lines[done], src_lines[len(done):])))),
            "invoke_index": block.index[src_lines],
            "complete_index": pa.array(np.concatenate((index[done], np.zeros(len(stale), np.int64))),
                                       pa.int64(), mask=np.arange(len(src_lines)) >= len(done)),
        }
        at = np.concatenate((done, stale))
        if extra:
            columns = _with_rows(columns, extra)
            at = np.concatenate((at, [row[0] for row in extra]))
        self._leave_open(block, lines, lasts[invoke[lasts]])
        if not len(stale) and not extra:  # completions only: `done` is in history order already
            return columns                 # (no take of every column: ~0.03 CPU-s per 1M sends)
        order = pa.array(stable_order(at))
        return {name: _array(col).take(order) for name, col in columns.items()}

    def _leave_open(self, block: Block, lines: np.ndarray, open_at: np.ndarray) -> None:
        """Processes whose last send in the run is an invocation: pending, in invocation order."""
        for at in np.sort(open_at).tolist():
            line = int(lines[at])
            process = int(block.process[line])
            self.pending[str(process)] = {"index": int(block.index[line]), "process": process,
                                          "value": [int(block.send_key[line]),
                                                    int(block.send_value[line].as_py())]}

    def _polls(self, block: Block, lines: np.ndarray, lo: int, hi: int) -> dict | None:
        if not len(lines):
            return None
        process, kind, index, firsts, lasts, invoke, prev, after_invoke = _pairing(block, lines)
        invoke_index = np.where(after_invoke, index[prev], index)
        for at in firsts.tolist():
            if not invoke[at]:
                invoke_index[at] = self.poll_invokes.pop(str(process[at]), int(index[at]))
        for at in lasts.tolist():
            if invoke[at]:
                self.poll_invokes[str(process[at])] = int(index[at])
            else:
                self.poll_invokes.pop(str(process[at]), None)
        ok = np.flatnonzero(kind == OK)
        if not len(ok):
            return None
        # Sessions, numbered in order of first appearance (constant per process in a run).
        procs, first_seen, which = _unique(process[ok])
        session_of = np.zeros(len(procs), np.int64)
        for u in np.argsort(first_seen).tolist():
            session_of[u] = self.session_of(str(procs[u]))
        line_session = np.zeros(hi - lo, np.int64)
        line_session[lines[ok] - lo] = session_of[which]
        line_invoke = np.zeros(hi - lo, np.int64)
        line_invoke[lines[ok] - lo] = invoke_index[ok]
        line_process = np.zeros(hi - lo, np.int32)  # the process's entry in `procs`
        line_process[lines[ok] - lo] = which

        s0, s1 = np.searchsorted(block.seg_line, [lo, hi])
        seg_pairs = block.seg_pairs[s0:s1]
        seg_line = block.seg_line[s0:s1]
        seg_key = block.seg_key[s0:s1]
        seg_session = self._kept_sessions(block, seg_line, seg_key, line_session[seg_line - lo])
        if self.final_phase:
            self._final_reads(block, s0, s1, seg_session, line_invoke[seg_line - lo])
        p0 = int(block.seg_first[s0]) if s0 < len(block.seg_first) else len(block.pair_offset)
        rows = int(seg_pairs.sum())
        p1 = p0 + rows
        first_seq = self._seq(seg_session, seg_key, seg_pairs)
        columns = native.expand_reads(seg_key, seg_line - lo, seg_pairs, seg_session, first_seq,
                                      line_process, block.index[lo:hi], line_invoke, rows)
        if columns is None:  # without the C library: the same columns by numpy
            rel = np.repeat(seg_line - lo, seg_pairs)
            pos = ranges(np.zeros(len(seg_pairs), np.int64), seg_pairs)
            columns = {"key": np.repeat(seg_key, seg_pairs), "process": line_process[rel],
                       "index": block.index[lo:hi][rel], "pos": pos.astype(np.int32),
                       "session": np.repeat(seg_session, seg_pairs), "invoke_index": line_invoke[rel],
                       "seq": np.repeat(first_seq, seg_pairs) + pos}
        return {
            "key": columns["key"], "offset": block.pair_offset[p0:p1],
            "value": block.pair_value.slice(p0, p1 - p0),
            # a dictionary of the run's processes (the text of a proven line's process is
            # str() of its number): the Parquet writer takes it as it stands, no take of
            # strings here and no hashing of them there (~0.25 CPU-s per 5M reads)
            "process": pa.DictionaryArray.from_arrays(columns["process"], pc.cast(procs, pa.string())),
            "index": columns["index"], "pos": columns["pos"], "session": columns["session"],
            "invoke_index": columns["invoke_index"], "final": np.full(rows, bool(self.final_phase)),
            "seq": columns["seq"],
        }

    def _kept_sessions(self, block: Block, seg_line, seg_key, seg_session) -> np.ndarray:
        """Segments' sessions with the streams a reassignment kept (`Flattener.kept`) put back.

        A process with kept keys had its own session numbered at the
        reassignment, so numbering per process above gave the reference's numbers.
        """
        if not self.kept:
            return seg_session
        process = block.process[seg_line]
        keeping = np.isin(process, np.array([int(p) for p in self.kept if p.lstrip("-").isdigit()],
                                            np.int64))
        if not keeping.any():
            return seg_session
        seg_session = seg_session.copy()
        for at in np.flatnonzero(keeping).tolist():
            kept = self.kept[str(int(process[at]))].get(int(seg_key[at]))
            if kept is not None:
                seg_session[at] = kept
        return seg_session

    def _seq(self, seg_session: np.ndarray, seg_key: np.ndarray, seg_pairs: np.ndarray) -> np.ndarray:
        """Each segment's first read's position in its (session, key) stream, continuing
        self.streams (its later reads follow it: a segment is one stream's reads).

        Worked out per segment, not per read (a third as many): a stable sort
        groups each stream's segments in history order. The streams' counts are
        looked up and updated all at once (`StreamCounts.add`, sorted arrays): a
        Python statement per stream was the conversion's largest Python cost, and
        dict updates a session at a time (`map(dict.get)`, `dict.update`) ~0.13
        CPU-s per 2M lines.
        """
        first = np.zeros(len(seg_pairs), np.int64)
        read = np.flatnonzero(seg_pairs)  # segments with reads: streams with none get no count
        if not len(read):
            return first
        # by session, then key; stable: history order within a stream (np.lexsort's order)
        order = stable_order(seg_key[read])
        order = order[stable_order(seg_session[read][order])]
        at = read[order]
        s, k, pairs = seg_session[at], seg_key[at], seg_pairs[at]
        new = np.ones(len(at), bool)
        new[1:] = (s[1:] != s[:-1]) | (k[1:] != k[:-1])
        starts = np.flatnonzero(new)
        before = np.cumsum(pairs) - pairs  # reads of the earlier segments, all streams
        sizes = np.diff(np.append(starts, len(at)))
        stream_reads = np.add.reduceat(pairs, starts)
        stream_s, stream_k = s[starts], k[starts]
        had = self.streams.add(stream_s, stream_k, stream_reads)
        first[at] = np.repeat(had - before[starts], sizes) + before
        return first

    def _final_reads(self, block: Block, s0: int, s1: int, session, invoke_index) -> None:
        """Flattener._final_poll for the run's segments, in order."""
        last_offset = block.pair_offset[np.maximum(block.seg_first[s0:s1] + block.seg_pairs[s0:s1] - 1, 0)] \
            if len(block.pair_offset) else np.zeros(s1 - s0, np.int64)
        lines = block.seg_line[s0:s1]
        for key, pairs, last, sess, inv, index in zip(
                block.seg_key[s0:s1].tolist(), block.seg_pairs[s0:s1].tolist(), last_offset.tolist(),
                session.tolist(), invoke_index.tolist(), block.index[lines].tolist()):
            stream = (sess, key)
            if pairs:
                self.final_position[stream] = last + 1
            self.last_final[key] = (key, self.final_position.get(stream, 0), inv, index, None)


def _array(column) -> pa.Array:
    return column if isinstance(column, (pa.Array, pa.ChunkedArray)) else pa.array(column)


def _with_rows(columns: dict, rows: list[tuple]) -> dict:
    """Columns with a few Python rows (SEND_COLUMNS order, after a leading position) appended."""
    out = {}
    for i, (name, col) in enumerate(columns.items(), 1):
        col = _array(col)
        out[name] = pa.concat_arrays([col, pa.array([row[i] for row in rows], col.type)])
    return out


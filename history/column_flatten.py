"""The Flattener whose read rows go into column lists (for pyarrow), and the
per-(session, key) read counts behind its `seq` column.

Shared by the op-by-op conversion (`history.parquet`) and the block-wise one
(`history.flatten_runs`), so both give the same rows in the same order.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from history.flatten import READ_COLUMNS, Flattener, encode_value


class StreamCounts:
    """Reads so far per (session, key) stream, for the `seq` column.

    Why not one dict of every stream: each consumer session times each key it
    read is ~200 bytes of Python objects that only accumulate (crashed
    consumers are replaced by new processes, new sessions; a 10M-op history
    held ~600 MB of them, ~50 MB even as numpy arrays). Sessions not read from
    since the last `settle()` go to an unlinked temporary file (16 bytes a
    stream) and come back if the session reads again, so the counts stay exact
    and memory holds only the sessions in use.

    The live streams are two numpy arrays sorted by stream (`session << 32 |
    key id`, key ids numbered as keys are first seen), so that a block's streams
    are looked up and counted by `add` with a few whole-array operations: the
    block-wise conversion's per-stream dict updates and the marshal of every idle
    session were ~0.2 of its ~0.6 main-thread CPU-s per 2M lines. `of(session)`
    hands out one session's counts as a dict (key -> reads so far) to read and
    update, for the op-by-op Flattener; `add` and `settle` take it back.
    """

    def __init__(self) -> None:
        self.stream = np.zeros(0, np.int64)  # live streams: session << 32 | key id, ascending
        self.count = np.zeros(0, np.int64)   # their reads so far
        self.dicts: dict[int, dict[int, int]] = {}  # sessions handed out by of()
        self.known = np.zeros(0, np.int64)   # keys seen, ascending
        self.known_id = np.zeros(0, np.int64)  # their ids
        self.key_of = np.zeros(0, np.int64)  # id -> key
        self.idle: dict[int, tuple[int, int]] = {}  # session -> (file offset, streams)
        self.used: set[int] = set()
        self.spill = None
        self.end = 0  # the file's size
        self.moved = False  # read from since the last write

    def live_sessions(self) -> set[int]:
        """The sessions held in memory."""
        return set((self.stream >> 32).tolist()) | set(self.dicts)

    def of(self, session: int) -> dict[int, int]:
        """The counts of one session's streams (key -> reads so far), to read and update."""
        self.used.add(session)
        counts = self.dicts.get(session)
        if counts is None:
            _packable(session)
            self._back([session])
            lo, hi = np.searchsorted(self.stream, [session << 32, (session + 1) << 32])
            keys = self.key_of[self.stream[lo:hi] & 0xFFFFFFFF]
            counts = self.dicts[session] = dict(zip(keys.tolist(), self.count[lo:hi].tolist()))
            if hi > lo:
                self.stream = np.delete(self.stream, np.s_[lo:hi])
                self.count = np.delete(self.count, np.s_[lo:hi])
        return counts

    def add(self, sessions: np.ndarray, keys: np.ndarray, reads: np.ndarray) -> np.ndarray:
        """Count reads[i] more reads of each stream (sessions[i], keys[i]) (no stream
        twice); -> the reads each had before."""
        if not len(sessions):
            return np.zeros(0, np.int64)
        _packable(int(sessions.min()))
        _packable(int(sessions.max()))
        present = np.unique(sessions).tolist()
        self.used.update(present)
        self._back(present)
        stream = (sessions << 32) | self._ids(keys)
        order = np.argsort(stream)
        stream, reads = stream[order], reads[order]
        at = np.searchsorted(self.stream, stream)
        found = at < len(self.stream)
        found[found] = self.stream[at[found]] == stream[found]
        had = np.zeros(len(stream), np.int64)
        had[found] = self.count[at[found]]
        self.count[at[found]] += reads[found]
        new = ~found
        self.stream = np.insert(self.stream, at[new], stream[new])
        self.count = np.insert(self.count, at[new], reads[new])
        out = np.empty(len(had), np.int64)
        out[order] = had
        return out

    def _ids(self, keys: np.ndarray) -> np.ndarray:
        """Each key's id (new keys numbered on the way)."""
        unique, which = np.unique(keys, return_inverse=True)
        at = np.searchsorted(self.known, unique)
        seen = at < len(self.known)
        seen[seen] = self.known[at[seen]] == unique[seen]
        if not seen.all():
            fresh = unique[~seen]
            ids = np.arange(len(self.key_of), len(self.key_of) + len(fresh))
            self.key_of = np.concatenate((self.key_of, fresh))
            where = np.searchsorted(self.known, fresh)
            self.known = np.insert(self.known, where, fresh)
            self.known_id = np.insert(self.known_id, where, ids)
            at = np.searchsorted(self.known, unique)
        return self.known_id[at][which]

    def _back(self, sessions) -> None:
        """The given sessions' streams into the arrays: from dicts handed out, from the file."""
        rows = []
        for session in sessions:
            counts = self.dicts.pop(session, None)
            if counts is not None:
                if counts:
                    keys = np.fromiter(counts, np.int64, len(counts))
                    values = np.fromiter(counts.values(), np.int64, len(counts))
                    rows.append(np.stack(((session << 32) | self._ids(keys), values), axis=1))
            elif session in self.idle:
                rows.append(self._unspill(*self.idle.pop(session)))
        if rows:
            rows = np.concatenate(rows)
            rows = rows[np.argsort(rows[:, 0])]
            where = np.searchsorted(self.stream, rows[:, 0])
            self.stream = np.insert(self.stream, where, rows[:, 0])
            self.count = np.insert(self.count, where, rows[:, 1])

    def settle(self) -> None:
        """Move the sessions not used since the last settle to the file."""
        self._back(list(self.dicts))
        session = self.stream >> 32
        idle = ~np.isin(session, np.fromiter(self.used, np.int64, len(self.used)))
        if idle.any():
            if self.spill is None:
                self.spill = tempfile.TemporaryFile()
            if self.moved:  # a session came back since: the file is not at its end
                self.spill.seek(0, os.SEEK_END)
                self.moved = False
            rows = np.stack((self.stream[idle], self.count[idle]), axis=1)
            self.spill.write(rows.tobytes())
            spilled = session[idle]
            starts = np.flatnonzero(np.diff(spilled, prepend=-1))
            sizes = np.diff(np.append(starts, len(spilled)))
            for s, start, n in zip(spilled[starts].tolist(), starts.tolist(), sizes.tolist()):
                self.idle[s] = (self.end + 16 * start, n)
            self.end += rows.nbytes
            self.stream, self.count = self.stream[~idle], self.count[~idle]
        self.used.clear()

    def _unspill(self, at: int, n: int) -> np.ndarray:
        self.spill.seek(at)
        self.moved = True
        return np.frombuffer(self.spill.read(16 * n), np.int64).reshape(n, 2)

    def close(self) -> None:
        if self.spill is not None:
            self.spill.close()


def _packable(session: int) -> None:
    """Sessions are numbered from 0 by the Flattener (`session_of`): under 2**31 for any
    history of fewer polls, so that `session << 32 | key id` fits an int64."""
    if not 0 <= session < 1 << 31:
        raise ValueError(f"session {session}: stream counts take sessions 0 .. 2**31 - 1")


class ColumnFlattener(Flattener):
    """Flattener whose read rows go straight into column lists, ready for pyarrow.

    Why: a poll's read rows are most rows of a big history; building a tuple
    per row and transposing them again costs more than reading the JSON. The
    rows are those of `Flattener._poll`, in the same order, with
    `encode_value`'s text (an int's canonical JSON is its `str`).
    """

    def __init__(self) -> None:
        super().__init__()
        self.reads = self._columns()
        self.streams = StreamCounts()

    @staticmethod
    def _columns() -> dict:
        return {name: [] for name in READ_COLUMNS + ("seq",)}

    def _poll(self, polled: dict, process, index, invoke_index) -> list[tuple]:
        reads = self.reads
        final = bool(self.final_phase)
        process_session = self.session_of(process)
        for key in sorted(polled, key=int):
            session = self.stream_session(process, int(key), process_session)
            pairs = polled[key]
            n = len(pairs)
            reads["offset"].extend([int(offset) for offset, _ in pairs])
            reads["value"].extend([str(v) if type(v) is int else encode_value(v) for _, v in pairs])
            reads["key"].extend([int(key)] * n)
            reads["process"].extend([process] * n)
            reads["index"].extend([index] * n)
            reads["pos"].extend(range(n))
            reads["session"].extend([session] * n)
            reads["invoke_index"].extend([invoke_index] * n)
            reads["final"].extend([final] * n)
            counts = self.streams.of(session)
            first = counts.get(int(key), 0)
            reads["seq"].extend(range(first, first + n))
            counts[int(key)] = first + n
        return []

    def take_reads(self) -> dict:
        reads, self.reads = self.reads, self._columns()
        return reads

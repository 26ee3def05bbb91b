"""The Flattener whose read rows go into column lists (for pyarrow), and the
per-(session, key) read counts behind its `seq` column.

Shared by the op-by-op conversion (`history.parquet`) and the block-wise one
(`history.flatten_runs`), so both give the same rows in the same order.
"""

from __future__ import annotations

import marshal
import os
import tempfile

from history.flatten import READ_COLUMNS, Flattener, encode_value


class StreamCounts:
    """Reads so far per (session, key) stream, for the `seq` column.

    Why not one dict of every stream: each consumer session times each key it
    read is ~200 bytes of Python objects that only accumulate (crashed
    consumers are replaced by new processes, new sessions; a 10M-op history
    held ~600 MB of them, ~50 MB even as numpy arrays). Sessions not read from
    since the last `settle()` go to an unlinked temporary file (~10 bytes a
    stream, `marshal`: half the CPU of packing them into numpy arrays, which
    was ~0.1 CPU-s per 2M lines) and come back if the session reads again, so
    the counts stay exact and memory holds only the sessions in use.
    """

    def __init__(self) -> None:
        self.live: dict[int, dict[int, int]] = {}  # session -> key -> reads so far
        self.idle: dict[int, tuple[int, int]] = {}  # session -> (file offset, bytes)
        self.used: set[int] = set()
        self.spill = None
        self.end = 0  # the file's size
        self.moved = False  # read from since the last write

    def of(self, session: int) -> dict[int, int]:
        """The counts of one session's streams (key -> reads so far), to read and update."""
        self.used.add(session)
        counts = self.live.get(session)
        if counts is None:
            counts = self.live[session] = self._unspill(*self.idle.pop(session, (0, 0)))
        return counts

    def settle(self) -> None:
        """Move the sessions not used since the last settle to the file."""
        for session in [s for s in self.live if s not in self.used]:
            counts = self.live.pop(session)
            if self.spill is None:
                self.spill = tempfile.TemporaryFile()
            if self.moved:  # a session came back since: the file is not at its end
                self.spill.seek(0, os.SEEK_END)
                self.moved = False
            self.idle[session] = (self.end, self.spill.write(marshal.dumps(counts)))
            self.end += self.idle[session][1]
        self.used.clear()

    def _unspill(self, at: int, n: int) -> dict[int, int]:
        if not n:
            return {}
        self.spill.seek(at)
        self.moved = True
        return marshal.loads(self.spill.read(n))

    def close(self) -> None:
        if self.spill is not None:
            self.spill.close()


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

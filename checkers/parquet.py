"""Histories and replica dumps -> Parquet (pyarrow), the input of the Spark drivers.

Why Parquet: the Spark drivers must not parse JSON lines in the JVM or ship
Python objects through the driver; columnar files let `local[2]` scan tens of
millions of rows and let a campaign (many store dirs) be checked in one job.
Every table carries a `run` column naming its store dir, so files of many
runs can simply be read together.

Layout of one run's Parquet dir (by default `<store>/parquet/`):
`sends.parquet`, `reads.parquet`, `records.parquet`, `replicas.parquet`, `ends.parquet`,
columns as in `checkers.flatten` plus `run` first, and in `reads` one more
column, `seq`: the read's position in its (session, key) stream (0, 1, 2...
in history order), which lets the Spark poll-order check clear a whole
stream with one aggregation (offset - seq constant) instead of sorting it.
Writers are chunked: rows go out in row groups of CHUNK_ROWS, so memory
stays flat for any history size.
"""

from __future__ import annotations

import os
import tempfile
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from checkers.flatten import READ_COLUMNS, Flattener, dump_rows, encode_value, history_stats

CHUNK_ROWS = 500_000
TABLES = ("sends", "reads", "records", "replicas", "ends")

SCHEMAS = {
    "sends": pa.schema([("run", pa.string()), ("key", pa.int64()), ("value", pa.string()),
                        ("offset", pa.int64()), ("type", pa.string()), ("process", pa.string()),
                        ("invoke_index", pa.int64()), ("complete_index", pa.int64())]),
    "reads": pa.schema([("run", pa.string()), ("key", pa.int64()), ("offset", pa.int64()),
                        ("value", pa.string()), ("process", pa.string()), ("index", pa.int64()),
                        ("pos", pa.int32()), ("session", pa.int64()),
                        ("invoke_index", pa.int64()), ("final", pa.bool_()), ("seq", pa.int64())]),
    "records": pa.schema([("run", pa.string()), ("node", pa.string()), ("key", pa.int64()),
                          ("offset", pa.int64()), ("epoch", pa.int64()), ("value", pa.string())]),
    "replicas": pa.schema([("run", pa.string()), ("node", pa.string()), ("key", pa.int64()),
                           ("hw", pa.int64()), ("leo", pa.int64()), ("log_start", pa.int64())]),
    "ends": pa.schema([("run", pa.string()), ("key", pa.int64()), ("end_offset", pa.int64()),
                       ("invoke_index", pa.int64()), ("complete_index", pa.int64())]),
}


class TableWriter:
    """Buffers rows (tuples without `run`, or ready column chunks) and writes
    them, in the order given, as row groups of about chunk_rows rows."""

    def __init__(self, path: str, table: str, run: str, chunk_rows: int = CHUNK_ROWS) -> None:
        self.schema = SCHEMAS[table]
        self.run = run
        self.chunk_rows = chunk_rows
        self.buffer: list[tuple] = []
        self.tables: list[pa.Table] = []  # chunks waiting, in order
        self.waiting = 0  # their rows
        self.writer = pq.ParquetWriter(path, self.schema, compression="snappy")

    def add(self, rows: Iterable[tuple]) -> None:
        self.buffer.extend(rows)
        if len(self.buffer) >= self.chunk_rows:
            self.flush()

    def add_columns(self, columns: dict) -> None:
        """Add a chunk given as column lists or arrays (no row tuples: the fast path)."""
        self._take_buffer()
        n = len(next(iter(columns.values())))
        arrays = [self._run_column(n) if f.name == "run"
                  else _as_array(columns[f.name], f.type) for f in self.schema]
        self._wait(pa.Table.from_arrays(arrays, schema=self.schema))

    def flush(self) -> None:
        """Write everything buffered."""
        self._take_buffer()
        if self.tables:
            self.writer.write_table(pa.concat_tables(self.tables), row_group_size=max(self.waiting, 1))
            self.tables, self.waiting = [], 0

    def _take_buffer(self) -> None:
        if not self.buffer:
            return
        names = self.schema.names[1:]
        columns = list(zip(*self.buffer))
        arrays = [self._run_column(len(self.buffer))]
        arrays += [pa.array(col, self.schema.field(name).type) for name, col in zip(names, columns)]
        self.buffer.clear()
        self._wait(pa.Table.from_arrays(arrays, schema=self.schema))

    def _wait(self, table: pa.Table) -> None:
        self.tables.append(table)
        self.waiting += table.num_rows
        if self.waiting >= self.chunk_rows:
            self.flush()

    def _run_column(self, n: int) -> pa.Array:
        return pa.repeat(pa.scalar(self.run, pa.string()), n)

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _as_array(values, kind: pa.DataType) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.cast(kind)
    return pa.array(values, kind)


def open_writers(out_dir: str, run: str, tables=TABLES,
                 chunk_rows: int = CHUNK_ROWS) -> dict[str, TableWriter]:
    os.makedirs(out_dir, exist_ok=True)
    return {t: TableWriter(os.path.join(out_dir, f"{t}.parquet"), t, run, chunk_rows)
            for t in tables}


class StreamCounts:
    """Reads so far per (session, key) stream, for the `seq` column.

    Why not one dict of every stream: each consumer session times each key it
    read is ~200 bytes of Python objects that only accumulate (crashed
    consumers are replaced by new processes, new sessions; a 10M-op history
    held ~600 MB of them, ~50 MB even as numpy arrays). Sessions not read from
    since the last `settle()` go to an unlinked temporary file (16 bytes a
    stream) and come back if the session reads again, so the counts stay
    exact and memory holds only the sessions in use.
    """

    def __init__(self) -> None:
        self.live: dict[int, dict[int, int]] = {}  # session -> key -> reads so far
        self.idle: dict[int, tuple[int, int]] = {}  # session -> (file offset, streams)
        self.used: set[int] = set()
        self.spill = None

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
            at = self.spill.seek(0, os.SEEK_END)
            self.spill.write(np.array([list(counts), list(counts.values())], np.int64).tobytes())
            self.idle[session] = (at, len(counts))
        self.used.clear()

    def _unspill(self, at: int, n: int) -> dict[int, int]:
        if not n:
            return {}
        self.spill.seek(at)
        keys, numbers = np.frombuffer(self.spill.read(16 * n), np.int64).reshape(2, n).tolist()
        return dict(zip(keys, numbers))

    def close(self) -> None:
        if self.spill is not None:
            self.spill.close()


class _ColumnFlattener(Flattener):
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

    def _poll(self, op, process, index, invoke_index) -> list[tuple]:
        session = self.session_of(process)
        reads = self.reads
        final = bool(self.final_phase)
        polled = op.get("value") or {}
        for key in sorted(polled, key=int):
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


def write_run(out_dir: str, run: str, ops: Iterable[dict], dumps: dict[str, dict],
              chunk_rows: int = CHUNK_ROWS) -> dict:
    """Stream a history and dumps into one run's Parquet dir; -> the history stats.

    A `JsonlOps` (iter_jsonl) goes the block-wise way (`checkers.jsonl_parquet`,
    ~3x faster); any other iterable of ops is fed op by op. Memory stays flat
    either way: rows leave in chunks of CHUNK_ROWS.
    """
    from checkers.history import JsonlOps

    writers = open_writers(out_dir, run, chunk_rows=chunk_rows)
    flattener = None
    try:
        if isinstance(ops, JsonlOps):
            from checkers.jsonl_parquet import flatten_history
            flattener = flatten_history(ops, writers)
        else:
            flattener = _flatten_ops(ops, writers, chunk_rows)
        if flattener.reads["key"]:
            writers["reads"].add_columns(flattener.take_reads())
        writers["sends"].add(flattener.finish())
        writers["ends"].add(flattener.ends())
        for node in sorted(dumps):
            records, replicas = dump_rows(node, dumps[node])
            writers["records"].add(records)
            writers["replicas"].add(replicas)
    finally:
        for writer in writers.values():
            writer.close()
        if flattener is not None:
            flattener.streams.close()
    return history_stats(flattener.stats)


def _flatten_ops(ops: Iterable[dict], writers: dict, chunk_rows: int) -> _ColumnFlattener:
    """The reference: every op through the Flattener, in order."""
    flattener = _ColumnFlattener()
    feed, sends_out, pending_reads = flattener.feed, writers["sends"], flattener.reads["key"]
    for op in ops:
        sends, _ = feed(op)
        if sends:
            sends_out.add(sends)
        if len(pending_reads) >= chunk_rows:
            writers["reads"].add_columns(flattener.take_reads())
            pending_reads = flattener.reads["key"]
    return flattener


def table_paths(run_dirs: Iterable[str], table: str) -> list[str]:
    return [os.path.join(d, f"{table}.parquet") for d in run_dirs]

"""Histories and replica dumps -> Parquet (pyarrow), the input of the Spark drivers.

Why Parquet: the Spark drivers must not parse JSON lines in the JVM or ship
Python objects through the driver; columnar files let `local[2]` scan tens of
millions of rows and let a campaign (many store dirs) be checked in one job.
Every table carries a `run` column naming its store dir, so files of many
runs can simply be read together.

Layout of one run's Parquet dir (by default `<store>/parquet/`):
`sends.parquet`, `reads.parquet`, `records.parquet`, `replicas.parquet`, `ends.parquet`,
columns as in `history.flatten` plus `run` first, and in `reads` one more
column, `seq`: the read's position in its (session, key) stream (0, 1, 2...
in history order), which lets the Spark poll-order check clear a whole
stream with one aggregation (offset - seq constant) instead of sorting it.
Writers are chunked: rows go out in row groups of CHUNK_ROWS, so memory
stays flat for any history size.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from history.column_flatten import ColumnFlattener
from history.flatten import dump_rows, history_stats

CHUNK_ROWS = 500_000
# Dictionary-encoded columns: those with few distinct values. Why not every
# column (pyarrow's default): values, offsets, indexes and sequence numbers are
# nearly all distinct, so their dictionaries are built, overflow and are
# dropped for every row group; without them the reads table (most rows) wrote
# in ~0.6x the CPU (bench/history_to_parquet.py), files ~1.5x larger.
DICTIONARY_COLUMNS = ["run", "node", "key", "type", "process", "final", "absent"]
# No min/max statistics for the string columns no reader filters on: per 5M reads
# they cost `value` ~0.09 CPU-s, the dictionary-typed `run` and `process` ~0.05
# each (measured writing the reads table of bench/history_to_parquet.py's history).
NO_STATISTICS = {"run", "process", "value"}
DICTIONARY_TYPE = pa.dictionary(pa.int32(), pa.string())
# Columns handed to the writer as Arrow dictionaries (besides `run`): the block-wise
# conversion builds the reads' processes that way (history.flatten_runs).
ARROW_DICTIONARIES = {"reads": ("process",)}
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
                       ("invoke_index", pa.int64()), ("complete_index", pa.int64()),
                       ("absent", pa.string())]),
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
        # `run` is one value: handed over as a one-entry dictionary, which the writer
        # takes as its dictionary page as it stands, where a string column is hashed
        # row by row (~0.12 CPU-s per 5M rows); likewise the reads' `process`
        # (ARROW_DICTIONARIES). The file keeps the plain schema (store_schema=False:
        # no Arrow schema saved, so readers get these columns as strings).
        self.file_schema = self.schema
        for name in ARROW_DICTIONARIES.get(table, ()) + ("run",):
            at = self.schema.get_field_index(name)
            self.file_schema = self.file_schema.set(at, pa.field(name, DICTIONARY_TYPE))
        self.run_dictionary = pa.array([run], pa.string())
        self.run_indices = pa.repeat(pa.scalar(0, pa.int32()), 0)
        self.writer = pq.ParquetWriter(path, self.file_schema, compression="snappy", store_schema=False,
                                      use_dictionary=[c for c in DICTIONARY_COLUMNS if c in self.schema.names],
                                      write_statistics=[c for c in self.schema.names if c not in NO_STATISTICS])
        # Row groups are encoded and compressed in a thread of this writer's own
        # (Arrow releases the GIL), one at a time and in order, while the caller
        # builds the next: the writes were a third of the conversion's main thread.
        self.encoder: ThreadPoolExecutor | None = None
        self.writing: Future | None = None

    def add(self, rows: Iterable[tuple]) -> None:
        self.buffer.extend(rows)
        if len(self.buffer) >= self.chunk_rows:
            self.flush()

    def add_columns(self, columns: dict) -> None:
        """Add a chunk given as column lists or arrays (no row tuples: the fast path)."""
        self._take_buffer()
        n = len(next(iter(columns.values())))
        arrays = [self._run_column(n) if f.name == "run"
                  else _as_array(columns[f.name], f.type) for f in self.file_schema]
        self._wait(pa.Table.from_arrays(arrays, schema=self.file_schema))

    def flush(self) -> None:
        """Write everything buffered."""
        self._take_buffer()
        if self.tables:
            table = pa.concat_tables(self.tables).unify_dictionaries()  # one dictionary per column
            self.tables, self.waiting = [], 0
            self._written()  # at most one row group waits: memory stays bounded
            if self.encoder is None:
                self.encoder = ThreadPoolExecutor(1, thread_name_prefix="parquet-" + self.schema.names[1])
            self.writing = self.encoder.submit(self.writer.write_table, table, row_group_size=max(len(table), 1))

    def _written(self) -> None:
        """Wait for the row group being written (its error, if any, is raised here)."""
        if self.writing is not None:
            writing, self.writing = self.writing, None
            writing.result()

    def _take_buffer(self) -> None:
        if not self.buffer:
            return
        names = self.schema.names[1:]
        columns = list(zip(*self.buffer))
        arrays = [self._run_column(len(self.buffer))]
        arrays += [_as_array(col, self.file_schema.field(name).type) for name, col in zip(names, columns)]
        self.buffer.clear()
        self._wait(pa.Table.from_arrays(arrays, schema=self.file_schema))

    def _wait(self, table: pa.Table) -> None:
        self.tables.append(table)
        self.waiting += table.num_rows
        if self.waiting >= self.chunk_rows:
            self.flush()

    def _run_column(self, n: int) -> pa.Array:
        if n > len(self.run_indices):  # zeros, sliced for every chunk (no array per chunk)
            self.run_indices = pa.repeat(pa.scalar(0, pa.int32()), max(n, 2 * len(self.run_indices)))
        return pa.DictionaryArray.from_arrays(self.run_indices.slice(0, n), self.run_dictionary)

    def close(self) -> None:
        try:
            self.flush()
            self._written()
        finally:
            if self.encoder is not None:
                self.encoder.shutdown(wait=True)
            self.writer.close()


def _as_array(values, kind: pa.DataType) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.cast(kind)
    if pa.types.is_dictionary(kind):  # (Arrow makes no dictionary straight from numpy)
        return pa.array(values, kind.value_type).dictionary_encode()
    return pa.array(values, kind)


def open_writers(out_dir: str, run: str, tables=TABLES,
                 chunk_rows: int = CHUNK_ROWS) -> dict[str, TableWriter]:
    os.makedirs(out_dir, exist_ok=True)
    return {t: TableWriter(os.path.join(out_dir, f"{t}.parquet"), t, run, chunk_rows)
            for t in tables}


def write_run(out_dir: str, run: str, ops: Iterable[dict], dumps: dict[str, dict],
              chunk_rows: int = CHUNK_ROWS) -> dict:
    """Stream a history and dumps into one run's Parquet dir; -> the history stats.

    A `JsonlOps` (iter_jsonl) goes the block-wise way (`history.jsonl_parquet`,
    ~3x faster); any other iterable of ops is fed op by op. Memory stays flat
    either way: rows leave in chunks of CHUNK_ROWS.
    """
    from history.formats import JsonlOps

    writers = open_writers(out_dir, run, chunk_rows=chunk_rows)
    flattener = None
    try:
        if isinstance(ops, JsonlOps):
            from history.jsonl_parquet import flatten_history
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


def _flatten_ops(ops: Iterable[dict], writers: dict, chunk_rows: int) -> ColumnFlattener:
    """The reference: every op through the Flattener, in order."""
    flattener = ColumnFlattener()
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

"""A run's history.jsonl -> its Parquet tables, a block of lines at a time.

Why: `harness check --engine spark` converts the history before any Spark job
runs, and op by op (orjson, then the Flattener) that took over a minute for a
10M-op history. Here the file is read in blocks of whole lines; each block is
scanned into columns (`history.jsonl_scan`: the harness's own send and poll
lines parsed by one C pass, or proven by one regex and cut up with numpy
without the C library; any other line decoded by the reference reader), and flattened a run of lines at a time
(`history.flatten_runs`), with the ops the reference must see one by one
(resets, the final phase, lines of other shapes) fed to the reference
Flattener in between. The rows are the reference's, in its order (a test
converts every history the suite carries both ways).

Why this way, measured on this 2-core machine (bench/history_to_parquet.py,
a 1M-op synthetic history of 128 MB, load average ~5, CPU seconds):
- op by op, orjson + the Flattener (the reference, before): 6.7 s, 137k ops/s;
- `json.loads` of each line and nothing else: 3.2 s;
- Arrow's C++ JSON reader, every field but `value` (which has no one type:
  a list, a list of a list, an object with a key per log key): 1.4 s for
  parsing alone, values still to do;
- orjson alone on each line: ~1.0 s; the rest of the reference's 6.7 s is
  the Python that walks each decoded op, and split over two processes (byte
  ranges, then a merge of per-process state) that would still be ~3.4 s of
  wall time, more than this way takes in CPU;
- Arrow's RE2 with capture groups (extract_regex) to cut fields: 1.4 s per
  1M lines, against 0.22 s for a match-only pass (hence numpy for the cut);
- this way, parsing, bookkeeping and Parquet: 2.4 s, 419k ops/s; a 10M-op
  history converts in 28.5 s (350k ops/s), 20M ops in 49.8 s, at load 4-5.
Spark's JSON reader was not measured: a JVM on two cores takes ~30 s to start
(tests/checkers/conftest.py), half the budget, and the bookkeeping would
still be sequential.

Blocks are scanned by one thread ahead of the one that flattens and writes:
Arrow's kernels, numpy and the Parquet writer release the GIL, so the two
cores both work. Memory is bounded by a few blocks plus CHUNK_ROWS rows per
table, whatever the history's size.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Iterator

from history.flatten_runs import RunFlattener
from history.formats import JsonlOps
from history.jsonl_scan import Block, scan

BLOCK_BYTES = 4 << 20
AHEAD = 2  # blocks scanned ahead of the writer


def read_blocks(path: str, block_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines in file order, as (data, size): the block is data's first
    `size` bytes; the line cut off after them is read again at the start of the next
    block (a seek back), so a block costs one read and no copy (the copies of
    joining and cutting blocks were ~0.1 CPU-s per 2M lines). The last block holds
    whatever follows the last newline (a cut-off line)."""
    carry = b""
    with open(path, "rb", buffering=0) as handle:
        while True:
            chunk = handle.read(block_bytes)
            if not chunk:
                if carry:
                    yield carry, len(carry)
                return
            if carry:  # a line longer than a block
                chunk, carry = carry + chunk, b""
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                carry = chunk
                continue
            if cut < len(chunk):  # the cut-off line lies in what this read returned
                handle.seek(cut - len(chunk), os.SEEK_CUR)
            yield chunk, cut


def scanned_blocks(history: JsonlOps, block_bytes: int | None = None) -> Iterator[Block]:
    """The file's blocks scanned, in order (errors surface in line order)."""
    lineno, position = 1, 0
    for data, size in read_blocks(history.path, block_bytes or BLOCK_BYTES):
        block = scan(data, lineno, position, history.decode, size=size)
        lineno += len(block)
        position += len(block) - sum(op is None for op in block.others.values())
        yield block


def ahead(items: Iterator, depth: int = AHEAD) -> Iterator:
    """Run an iterator in a thread, `depth` items ahead; its exceptions are re-raised here."""
    box: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item, err) -> bool:
        """Hand over one item, unless the consumer has gone (then False)."""
        while not stop.is_set():
            try:
                box.put((item, err), timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item, None):
                    return
            put(done, None)
        except BaseException as err:  # noqa: BLE001 - handed to the consumer
            put(done, err)

    thread = threading.Thread(target=produce, name="jsonl-scan", daemon=True)
    thread.start()
    try:
        while True:
            item, err = box.get()
            if item is done:
                if err is not None:
                    raise err
                return
            yield item
    finally:
        stop.set()
        thread.join()


def feed_block(flattener: RunFlattener, block: Block, writers: dict) -> None:
    """Flatten one block into the writers, in history order."""
    flattener.streams.settle()  # sessions idle for a block are packed: memory stays flat
    if block.slow:
        for line in range(len(block)):
            op = block.others[line]
            if op is not None:
                _feed_op(flattener, op, writers)
        return
    active = set(block.active)
    for line, op in block.others.items():  # inert ops (nemesis, other fs): only counted
        if op is not None and line not in active:
            flattener.stats["ops"] += 1
            flattener.stats[op.get("type")] += 1
    lo = 0
    for line in block.active + [len(block)]:
        if line > lo:
            sends, reads = flattener.feed_run(block, lo, line)
            if sends is not None:
                writers["sends"].add_columns(sends)
            if reads is not None:
                _take_reads(flattener, writers)
                writers["reads"].add_columns(reads)
        if line < len(block):
            _feed_op(flattener, block.others[line], writers)
        lo = line + 1


def _feed_op(flattener: RunFlattener, op: dict, writers: dict) -> None:
    sends, _ = flattener.feed(op)
    if sends:
        writers["sends"].add(sends)
    if len(flattener.reads["key"]) >= writers["reads"].chunk_rows:
        _take_reads(flattener, writers)


def _take_reads(flattener: RunFlattener, writers: dict) -> None:
    """Read rows the reference Flattener collected, into the writer before any later rows."""
    if flattener.reads["key"]:
        writers["reads"].add_columns(flattener.take_reads())


def flatten_history(history: JsonlOps, writers: dict, block_bytes: int | None = None) -> RunFlattener:
    """Stream the history's rows into open writers; -> the flattener, for what is left
    (open sends, ends, stats). Sets history.truncated as iterating it would."""
    history.truncated = False
    flattener = RunFlattener()
    for block in ahead(scanned_blocks(history, block_bytes)):
        feed_block(flattener, block, writers)
    return flattener

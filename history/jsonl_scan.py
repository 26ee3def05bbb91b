"""A block of history.jsonl lines -> columns, vectorised over the harness's own op lines.

Why: decoding every line into a dict and walking it in Python caps the
JSONL -> Parquet conversion at ~140,000 ops/s; a 10M-op history took over a
minute. Nearly every line is one of two shapes `history.writer.HistoryWriter`
writes (compact JSON, fields in one order, integer keys, offsets and values):
a `send` ([key, value] or [key, [offset, value]]) or a `poll` (null or
{"key": [[offset, value], ...], ...}). One RE2 pattern (Arrow's C++ regex
kernel, ~0.2 s per million lines) proves a line has exactly that shape, and
numpy then cuts its integers out of the bytes: runs of digit bytes are the
tokens, and in a proven line a token's role follows from its place and the
byte before it. Hand-written rather than a JSON library because of the
measured margin (bench/history_to_parquet.py): orjson alone, one dict per line,
already costs ~1 s per million lines before any bookkeeping. When the C
library is built (`history.native`, scripts/setup.sh), one C pass parses each
line by the same grammar and writes every column of the block, instead of the
numpy passes, the regex, the casts and the takes (the scan ~4x less CPU than
this numpy way; same blocks, a test).

Every other line (nemesis ops, other fs, blank or cut-off lines, other
spellings of the same op: spaces, other key orders, floats, strings, huge
integers, a repeated poll key) is decoded by `JsonlOps.decode`, the
reference reader, so what it accepts and its `file:line` errors are the
reference's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history import native
from history.flatten import DATA_FS, RESET_FS

OTHER, SEND, POLL = 0, 1, 2
INVOKE, OK, FAIL, INFO = 0, 1, 2, 3
TYPE_NAMES = ("invoke", "ok", "fail", "info")
_TYPE_LENGTHS = np.array([6, 2, 4, 4])

# The two line shapes. Integers are canonical JSON (no "-0", no leading zero)
# of at most 18 digits, so their text is Python's str() of the value and fits
# int64; an error text is printable ASCII without quote or backslash.
_NAT = r"(?:0|[1-9][0-9]{0,17})"
_INT = r"(?:0|-?[1-9][0-9]{0,17})"
_PAIR = r"\[" + _INT + "," + _INT + r"\]"
_ERROR = r'(?:,"error":"[ !#-\[\]-~]*")?'
_KEY_READS = '"' + _INT + r'":\[(?:' + _PAIR + "(?:," + _PAIR + r")*)?\]"
_HEAD = (r'^\{"index":' + _NAT + r',"time":-?' + _NAT + r',"process":' + _NAT
         + r',"type":"(?:invoke|ok|fail|info)","f":"')
_SEND = r'send","value":\[' + _INT + ",(?:" + _INT + "|" + _PAIR + r")\]" + _ERROR
_POLL = (r'poll","value":(?:null' + _ERROR + r"|\{(?:" + _KEY_READS + "(?:," + _KEY_READS
         + r")*)?\})")
FAST_LINE = _HEAD + "(?:" + _SEND + "|" + _POLL + r")\}\n$"

# A block with more active OTHER lines than this, and more than one in this many
# lines, is fed op by op: a run costs ~50 numpy calls, a decoded op ~5 us.
SLOW_ACTIVE = 32



@dataclass
class Block:
    """One block's lines as columns. Line arrays have one entry per line;
    entries of OTHER lines are meaningless. Segments (one per key of an ok
    poll, keys ascending within a poll) and pairs (one per [offset, value],
    in order) are sorted by line."""

    first_lineno: int
    kind: np.ndarray                  # OTHER | SEND | POLL
    type: np.ndarray                  # INVOKE | OK | FAIL | INFO
    process: np.ndarray               # int64
    process_text: pa.Array            # str(process)
    index: np.ndarray                 # int64
    send_key: np.ndarray
    send_value: pa.Array              # canonical JSON text of the value sent
    send_offset: np.ndarray
    send_has_offset: np.ndarray       # [key, [offset, value]]
    seg_line: np.ndarray
    seg_key: np.ndarray
    seg_first: np.ndarray             # first pair of the segment
    seg_pairs: np.ndarray             # number of pairs
    pair_offset: np.ndarray
    pair_value: pa.Array
    others: dict[int, dict | None] = field(default_factory=dict)  # line -> decoded op
    active: list[int] = field(default_factory=list)  # OTHER lines the bookkeeping must see
    slow: bool = False  # every line decoded: feed them all to the reference Flattener

    def __len__(self) -> int:
        return len(self.kind)


def is_active(op: dict) -> bool:
    """Does the Flattener do more with this op than count it?"""
    f = op.get("f")
    if str(op.get("process")) == "nemesis":
        return f == "final"
    return f in DATA_FS or f in RESET_FS and op.get("type") != "invoke"


def scan(data: bytes, first_lineno: int, first_position: int, decode, use_native: bool = True,
         size: int | None = None) -> Block:
    """Columns of a block of whole lines (only the file's last line may lack its newline).

    Every column comes from one C pass (`history.native`) when its library is
    built, else from numpy and Arrow (`use_native=False` forces that way: the
    tests compare the two).

    The block is data's first `size` bytes (all of it by default).

    `decode(line, lineno, position)` decodes an OTHER line (JsonlOps.decode):
    it raises HistoryError for a bad line and returns None for a skipped one.
    """
    if size is None:
        size = len(data)
    columns = native.scan_block(data, size) if use_native else None
    if columns is not None:  # every column in one C pass (history/native.c)
        ends = columns.pop("ends")
        starts = np.concatenate(([0], ends[:-1]))
        block = Block(first_lineno, **columns)
        _order_keys(block)
        _decode_others(block, data, starts, ends, first_position, decode)
        return block
    if size != len(data):
        data = data[:size]
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == 10) + 1
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(buf))
    starts = np.concatenate(([0], ends[:-1]))
    offsets = np.concatenate(([0], ends)).astype(np.int32)
    lines = pa.Array.from_buffers(pa.binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    fast = pc.match_substring_regex(lines, FAST_LINE).to_numpy(zero_copy_only=False)

    # Tokens: maximal runs of digits and '-'; their text is one Arrow string array.
    digit = ((buf - np.uint8(48)) < 10) | (buf == 45)  # 0-9 or '-' (7x faster than a lookup table)
    edges = np.diff(digit.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    tok_start = np.flatnonzero(edges == 1)
    tok_end = np.flatnonzero(edges == -1)
    tok_offsets = np.concatenate(([0], np.cumsum(tok_end - tok_start))).astype(np.int32)
    tokens = pa.Array.from_buffers(pa.string(), len(tok_start),
                                   [None, pa.py_buffer(tok_offsets), pa.py_buffer(buf[digit])])
    n, last_tok, last_byte = len(ends), max(len(tok_start) - 1, 0), len(buf) - 1
    first_raw = np.searchsorted(tok_start, starts)
    first = np.minimum(first_raw, last_tok)  # a proven line's index token
    proc_tok = np.minimum(first + 2, last_tok)
    after_proc = tok_end[proc_tok] if len(tok_start) else np.zeros(n, np.int64)
    c0 = buf[np.minimum(after_proc + 9, last_byte)]
    c2 = buf[np.minimum(after_proc + 11, last_byte)]
    typ = np.where(c0 == ord("o"), OK, np.where(c0 == ord("f"), FAIL, np.where(c2 == ord("v"), INVOKE, INFO)))
    f_at = after_proc + 9 + _TYPE_LENGTHS[typ] + 7
    kind = np.where(~fast, OTHER, np.where(buf[np.minimum(f_at, last_byte)] == ord("s"), SEND, POLL))

    ints_at = lambda idx: pc.cast(tokens.take(pa.array(idx)), pa.int64()).to_numpy()  # noqa: E731
    fast_lines = np.flatnonzero(fast)
    index = np.zeros(n, np.int64)
    process = np.zeros(n, np.int64)
    if len(fast_lines):
        index[fast_lines] = ints_at(first[fast_lines])
        process[fast_lines] = ints_at(proc_tok[fast_lines])
    process_text = tokens.take(pa.array(proc_tok)) if len(tok_start) else pa.nulls(n, pa.string())

    # Sends: [key, value] or [key, [offset, value]].
    key_tok = np.minimum(first + 3, last_tok)
    sends = np.flatnonzero(kind == SEND)
    send_key = np.zeros(n, np.int64)
    send_offset = np.zeros(n, np.int64)
    has_offset = np.zeros(n, bool)
    value_tok = np.minimum(first + 4, last_tok)
    if len(sends):
        has_offset[sends] = buf[tok_end[key_tok[sends]] + 1] == ord("[")
        send_key[sends] = ints_at(key_tok[sends])
        paired = sends[has_offset[sends]]
        send_offset[paired] = ints_at(value_tok[paired])
        value_tok[paired] += 1
    send_value = tokens.take(pa.array(value_tok)) if len(tok_start) else pa.nulls(n, pa.string())

    # Ok polls with an object value: every token after the header is a key
    # (after '"'), an offset (after '[') or a value (after ',').
    value_at = f_at + 4 + 10
    reads = np.flatnonzero((kind == POLL) & (typ == OK))
    reads = reads[buf[value_at[reads]] == ord("{")] if len(reads) else reads
    next_first = np.append(first_raw[1:], len(tok_start))  # a line's tokens end where the next's begin
    counts = np.maximum(next_first[reads] - (first[reads] + 3), 0)
    total = int(counts.sum())
    tok_line = np.repeat(reads, counts)
    tok = ranges(first[reads] + 3, counts)
    before = buf[tok_start[tok] - 1] if total else np.zeros(0, np.uint8)
    is_key = before == ord('"')
    is_offset = before == ord("[")
    key_toks = tok[is_key]
    seg_line = tok_line[is_key]
    seg_key = ints_at(key_toks) if len(key_toks) else np.zeros(0, np.int64)
    seg_of_tok = np.cumsum(is_key) - 1
    pair_seg = seg_of_tok[is_offset]
    pair_offset = ints_at(tok[is_offset]) if len(pair_seg) else np.zeros(0, np.int64)
    pair_value_tok = tok[before == ord(",")]
    seg_pairs = np.bincount(pair_seg, minlength=len(seg_key)).astype(np.int64)
    seg_first = np.cumsum(seg_pairs) - seg_pairs

    block = Block(first_lineno, kind, typ, process, process_text, index, send_key, send_value,
                  send_offset, has_offset, seg_line, seg_key, seg_first, seg_pairs, pair_offset,
                  tokens.take(pa.array(pair_value_tok, pa.int64())))
    _order_keys(block)
    _decode_others(block, data, starts, ends, first_position, decode)
    return block


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of arange(s, s + c) for each start s and count c."""
    counts = np.asarray(counts, np.int64)
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts - np.asarray(starts, np.int64), counts)


def _order_keys(block: Block) -> None:
    """Segments in ascending key order within each poll, as the Flattener reads them.

    A poll naming one key twice means JSON's last-wins: such a line is left to
    the reference reader (made OTHER, its segments and pairs dropped).
    """
    line, key = block.seg_line, block.seg_key
    same = line[1:] == line[:-1]
    if not np.any(same & (key[1:] <= key[:-1])):
        return
    order = np.lexsort((key, line))
    line, key = line[order], key[order]
    dup = np.zeros(len(line), bool)
    dup[1:] = (line[1:] == line[:-1]) & (key[1:] == key[:-1])
    bad = np.isin(line, line[dup])
    block.kind[np.unique(line[bad])] = OTHER
    keep = order[~bad]
    pairs = ranges(block.seg_first[keep], block.seg_pairs[keep])
    block.seg_line, block.seg_key = block.seg_line[keep], block.seg_key[keep]
    block.seg_pairs = block.seg_pairs[keep]
    block.seg_first = np.cumsum(block.seg_pairs) - block.seg_pairs
    block.pair_offset = block.pair_offset[pairs]
    block.pair_value = block.pair_value.take(pa.array(pairs, pa.int64()))


def _decode_others(block: Block, data: bytes, starts, ends, first_position: int, decode) -> None:
    """Decode the OTHER lines in order with the reference reader; note which are active.

    When active lines are so many that runs between them would be a few lines
    long (a file of another writer), every line is decoded and the block is slow.
    """
    skipped = np.zeros(len(block) + 1, np.int64)  # 1 just after each skipped line
    count = 0
    for line in np.flatnonzero(block.kind == OTHER).tolist():
        op = decode(data[starts[line]:ends[line]], block.first_lineno + line, first_position + line - count)
        block.others[line] = op
        if op is None:
            skipped[line + 1] = 1
            count += 1
        elif is_active(op):
            block.active.append(line)
    if len(block.active) > SLOW_ACTIVE and len(block.active) * SLOW_ACTIVE > len(block):
        before = np.cumsum(skipped)
        for line in np.flatnonzero(block.kind != OTHER).tolist():
            block.others[line] = decode(data[starts[line]:ends[line]], block.first_lineno + line,
                                        first_position + line - int(before[line]))
        block.kind[:] = OTHER
        block.slow = True


def ops_in(block: Block) -> int:
    """Ops (non-skipped lines) in the block."""
    return len(block) - sum(op is None for op in block.others.values())

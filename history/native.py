"""The history readers' byte passes in C (history/native.c), through ctypes.

Why C, hand-written: both readers spend their time making passes over a file's
bytes, and no library does these passes (orjson and Arrow's JSON reader build
values the readers never need; PyPI's EDN readers are pure Python):

- history.jsonl (`history.jsonl_scan`): the numpy scan makes some ten
  whole-block passes (newlines, a digit mask, its edges, packed digits), runs
  Arrow's regex over every line and casts the integer tokens from text; one C
  pass does it all (`tokens`, `fast_lines`; bench/history_to_parquet.py);
- Jepsen's EDN (`history.formats`): the rewrite of flat op maps into JSON for
  orjson took a dozen bytes/regex passes; one C pass (`edn_json`;
  bench/knossos_read_check.py).

`scripts/setup.sh` builds the library into build/native/ with the system's C
compiler (`bash scripts/build_native.sh`). Without it (a checkout never set up,
or a source newer than its library) each function returns None and the readers
take their Python way, with the same results (tests/checkers/test_native.py).
numpy and pyarrow are imported only by the history.jsonl functions: `harness
check-history` of an EDN file starts without them.
"""
from __future__ import annotations

import ctypes
import logging
import threading
from pathlib import Path

SOURCE = Path(__file__).with_suffix(".c")
LIBRARY = Path(__file__).resolve().parents[1] / "build" / "native" / "libhistory_native.so"
log = logging.getLogger(__name__)
_lib = None
_loaded = False


def library():
    """The loaded library, or None (not built, or older than its source)."""
    global _lib, _loaded
    if not _loaded:
        _loaded = True
        if not LIBRARY.is_file():
            log.info("%s is not built (bash scripts/build_native.sh): the Python readers are used", LIBRARY)
        elif LIBRARY.stat().st_mtime < SOURCE.stat().st_mtime:
            log.warning("%s is older than %s: rebuild it with bash scripts/build_native.sh; "
                        "the Python readers are used", LIBRARY, SOURCE.name)
        else:
            lib = ctypes.CDLL(str(LIBRARY))
            ptr = ctypes.c_void_p
            lib.fast_lines.restype = None
            lib.fast_lines.argtypes = [ctypes.c_char_p, ptr, ptr, ctypes.c_int64, ptr]
            lib.scan_block.restype = ctypes.c_int64
            lib.scan_block.argtypes = [ctypes.c_char_p, ctypes.c_int64] + [ptr] * 20
            lib.expand_reads.restype = None
            lib.expand_reads.argtypes = [ctypes.c_int64] + [ptr] * 15
            lib.edn_json.restype = ctypes.c_int64
            lib.edn_json.argtypes = [ctypes.c_char_p, ctypes.c_int64, ptr, ptr]
            _lib = lib
    return _lib


class _Scratch(threading.local):
    """scan_block's output arrays, kept per thread and reused from block to block.

    Why: sized for the worst case (a line per byte, a pair per 5 bytes), fresh
    arrays each block cost more in page faults (~0.4 CPU-s per 2M lines) than
    copying out the part the pass wrote."""

    size = -1
    arrays: tuple = ()


_scratch = _Scratch()


def _outputs(n: int) -> tuple:
    import numpy as np

    if n > _scratch.size:
        size = max(n, 1 << 16)
        most = size // 5 + 2  # a segment ("0":[],) or a pair ([0,0],) takes at least 6 bytes
        lines = size + 1
        _scratch.arrays = (
            np.empty(lines, np.int64),  # line ends
            np.empty(lines, np.uint8), np.empty(lines, np.uint8),  # kind, type
            *(np.empty(lines, np.int64) for _ in range(4)),  # index, process, send key, send offset
            np.empty(lines, np.uint8),  # has offset
            np.empty(lines + 1, np.int32), np.empty(size + 1, np.uint8),  # process texts
            np.empty(lines + 1, np.int32), np.empty(size + 1, np.uint8),  # send value texts
            *(np.empty(most, np.int64) for _ in range(5)),  # segments, pair offsets
            np.empty(most + 1, np.int32), np.empty(size + 1, np.uint8),  # pair value texts
            np.zeros(2, np.int64))  # segments, pairs written
        _scratch.size = size
    return _scratch.arrays


def scan_block(data: bytes, size: int | None = None):
    """The whole scan of a block in one C pass (native.c's scan_block): -> a dict of the
    line ends and the `history.jsonl_scan.Block` columns of data's first `size` bytes;
    None without the library."""
    lib = library()
    if lib is None:
        return None
    import numpy as np
    import pyarrow as pa

    size = len(data) if size is None else size
    arrays = _outputs(size)
    (line_end, kind, typ, index, process, send_key, send_offset, has_offset, process_offset,
     process_bytes, value_offset, value_bytes, seg_line, seg_key, seg_first, seg_pairs,
     pair_offset, pair_value_offset, pair_bytes, counts) = arrays
    count = lib.scan_block(data, size, *(a.ctypes.data for a in arrays))
    segs, pairs = int(counts[0]), int(counts[1])

    def texts(offsets, values, size):
        return pa.Array.from_buffers(pa.string(), size, [None, pa.py_buffer(offsets[:size + 1].copy()),
                                                        pa.py_buffer(values[:offsets[size]].copy())])
    return {"ends": line_end[:count].copy(), "kind": kind[:count].astype(np.int64),
            "type": typ[:count].astype(np.int64), "index": index[:count].copy(),
            "process": process[:count].copy(), "process_text": texts(process_offset, process_bytes, count),
            "send_key": send_key[:count].copy(), "send_offset": send_offset[:count].copy(),
            "send_has_offset": has_offset[:count].astype(bool), "send_value": texts(value_offset, value_bytes, count),
            "seg_line": seg_line[:segs].copy(), "seg_key": seg_key[:segs].copy(),
            "seg_first": seg_first[:segs].copy(), "seg_pairs": seg_pairs[:segs].copy(),
            "pair_offset": pair_offset[:pairs].copy(), "pair_value": texts(pair_value_offset, pair_bytes, pairs)}


def expand_reads(seg_key, seg_rel, seg_pairs, seg_session, seg_first, line_process, line_index,
                 line_invoke, rows: int) -> dict | None:
    """A run's read rows from its segments, in one C pass (native.c's expand_reads):
    -> key, process (codes), index, pos, session, invoke_index and seq columns of
    `rows` rows; None without the library. Segment arrays are int64, indexed by
    segment; line arrays by the line's place in the run (`seg_rel`)."""
    lib = library()
    if lib is None:
        return None
    import numpy as np

    inputs = [np.ascontiguousarray(a, np.int64) for a in (seg_key, seg_rel, seg_pairs, seg_session, seg_first)]
    inputs += [np.ascontiguousarray(line_process, np.int32), np.ascontiguousarray(line_index, np.int64),
               np.ascontiguousarray(line_invoke, np.int64)]
    out = {"key": np.empty(rows, np.int64), "process": np.empty(rows, np.int32),
           "index": np.empty(rows, np.int64), "pos": np.empty(rows, np.int32),
           "session": np.empty(rows, np.int64), "invoke_index": np.empty(rows, np.int64),
           "seq": np.empty(rows, np.int64)}
    lib.expand_reads(len(inputs[0]), *(a.ctypes.data for a in inputs), *(a.ctypes.data for a in out.values()))
    return out


def fast_lines(data: bytes, starts, ends):
    """Whether each line is one of HistoryWriter's two shapes (jsonl_scan.FAST_LINE)."""
    import numpy as np

    starts = np.ascontiguousarray(starts, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    fast = np.empty(len(starts), np.uint8)
    library().fast_lines(data, starts.ctypes.data, ends.ctypes.data, len(starts), fast.ctypes.data)
    return fast.view(bool)


class _EdnScratch(threading.local):
    """edn_json's output buffer, kept per thread and reused: a fresh zeroed buffer
    per file, then a copy of the JSON out of it, were ~5% of reading the corpus."""

    buffer = bytearray()


_edn_scratch = _EdnScratch()


def edn_json(data: bytes) -> tuple[memoryview, int, int] | None:
    """A flat EDN history as JSON text (every form in one array; each op completed
    with "value" and "index" as history.formats._flat_ops completes them), its
    number of ops and their depth (2: inside one vector); None without the library
    or where the C pass does not apply (see native.c). The JSON is a view of a
    buffer the next call overwrites."""
    lib = library()
    if lib is None:
        return None
    need = 3 * len(data) + 64  # :k -> "k", nil -> null, [ ], and ,"value":null,"index":N per op
    if len(_edn_scratch.buffer) < need:
        _edn_scratch.buffer = bytearray(need)
    out = _edn_scratch.buffer
    maps = (ctypes.c_int64 * 2)()
    size = lib.edn_json(data, len(data), (ctypes.c_char * len(out)).from_buffer(out), maps)
    if size < 0:
        return None
    return memoryview(out)[:size], maps[0], maps[1]

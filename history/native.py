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
            lib.scan_tokens.restype = ctypes.c_int64
            lib.scan_tokens.argtypes = [ctypes.c_char_p, ctypes.c_int64] + [ptr] * 7
            lib.fast_lines.restype = None
            lib.fast_lines.argtypes = [ctypes.c_char_p, ptr, ptr, ctypes.c_int64, ptr]
            lib.edn_json.restype = ctypes.c_int64
            lib.edn_json.argtypes = [ctypes.c_char_p, ctypes.c_int64, ptr, ptr]
            _lib = lib
    return _lib


def tokens(data: bytes):
    """-> (line ends, token starts, token ends, token values, token texts as an Arrow
    string array), as `history.jsonl_scan.scan` computes them; None without the library."""
    lib = library()
    if lib is None:
        return None
    import numpy as np
    import pyarrow as pa

    n = len(data)
    most = n // 2 + 2  # tokens are separated by at least one byte
    line_end = np.empty(n + 1, np.int64)
    lines = np.zeros(1, np.int64)
    start, end, value = (np.empty(most, np.int64) for _ in range(3))
    offset = np.empty(most + 1, np.int32)
    packed = np.empty(n + 1, np.uint8)
    count = lib.scan_tokens(data, n, line_end.ctypes.data, lines.ctypes.data, start.ctypes.data,
                            end.ctypes.data, value.ctypes.data, offset.ctypes.data, packed.ctypes.data)
    texts = pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offset[:count + 1]),
                                                        pa.py_buffer(packed[:offset[count]])])
    return line_end[:lines[0]], start[:count], end[:count], value[:count], texts


def fast_lines(data: bytes, starts, ends):
    """Whether each line is one of HistoryWriter's two shapes (jsonl_scan.FAST_LINE)."""
    import numpy as np

    starts = np.ascontiguousarray(starts, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    fast = np.empty(len(starts), np.uint8)
    library().fast_lines(data, starts.ctypes.data, ends.ctypes.data, len(starts), fast.ctypes.data)
    return fast.view(bool)


def edn_json(data: bytes) -> tuple[bytes, int] | None:
    """A flat EDN history as JSON text (every form in one array) and its number of
    maps; None without the library or where the C pass does not apply (see native.c)."""
    lib = library()
    if lib is None:
        return None
    out = ctypes.create_string_buffer(2 * len(data) + 16)  # :k -> "k", nil -> null, [ ]
    maps = ctypes.c_int64()
    size = lib.edn_json(data, len(data), out, ctypes.byref(maps))
    if size < 0:
        return None
    return ctypes.string_at(out, size), maps.value

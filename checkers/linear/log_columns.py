"""One key of a `log` history searched from its columns: the search's fast path.

Why: profiled on a 200k-op synthetic history (`harness bench`'s generator, load 6), the
in-process linearizability check spent 9.4 s, of which the search proper (the steps of
multi-call windows) was under a tenth; the rest was one Python object per op: `key_calls`
(41%), `Log.prepare` (21%), `wgl.windows` and the one-call windows' steps (25%). Here a
key's rows stay numpy/Arrow columns: `Log.prepare`'s pruning, the windows
(`wgl.windows`), and every one-call window's step are decided with array operations, and
only the windows where calls overlap are handed to the same WGL search
(`wgl._search`), with Call objects for their calls alone.

It is a proof of validity only: it returns the result `wgl.check_calls` would give
(`valid`, `calls`, `configs`, counted as `wgl._by_windows` counts them) when it can show
every window succeeds from the log the windows before it left, else None, and the caller
runs the whole search as before (for a counterexample, an `unknown`, or a key it does not
cover: an indefinite send `prepare` keeps, a poll that skips an observed offset, offsets
that are not 0..n-1 once each). So no verdict, count or counterexample changes.
"""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from checkers.linear.calls import Call
from checkers.linear.models import Log
from checkers.linear.wgl import DEFAULT_MAX_CONFIGS, _search


def _arrow(column, kind) -> pa.Array:
    array = column if isinstance(column, (pa.Array, pa.ChunkedArray)) else pa.array(column, kind)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array


def _ints(column, missing: int = -1) -> np.ndarray:
    """An Arrow/list column of integers (nulls -> missing) as int64."""
    if isinstance(column, list):  # Python rows: no pyarrow.array(list), which imports pandas
        if None in column:
            return np.array([missing if x is None else x for x in column], np.int64)
        return np.array(column, np.int64)
    array = _arrow(column, pa.int64())
    if array.null_count:
        out = array.to_numpy(zero_copy_only=False)  # float, nan for nulls
        return np.where(np.isnan(out), missing, out).astype(np.int64)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.int64)


def _null_mask(column) -> np.ndarray:
    if isinstance(column, list):
        return np.array([x is None for x in column], bool)
    array = _arrow(column, pa.int64())
    if not array.null_count:
        return np.zeros(len(array), bool)
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _strings(column) -> pa.Array:
    array = _arrow(column, pa.string())
    return array if array.type == pa.string() else array.cast(pa.string())


def check_columns(send_value, send_offset, send_type, send_inv, send_done,
                  read_offset, read_value, read_index, read_inv,
                  end: tuple | None, deadline: float | None,
                  max_configs: int = DEFAULT_MAX_CONFIGS) -> dict | None:
    """One key's rows as columns (`checkers.linearizability.key_calls`'s fields; `end` is
    (length, invoke, complete) or None) -> the valid result of the search, or None when
    the key needs the whole search. `deadline` is a time.monotonic() value."""
    if deadline is not None and time.monotonic() > deadline:
        return None
    if end is not None and any(x is None for x in end):
        return None
    arrow = isinstance(send_value, (pa.Array, pa.ChunkedArray))
    s_off = _ints(send_offset)
    s_inv, s_done = _ints(send_inv), _ints(send_done)
    if arrow:
        encoded = _strings(send_type).dictionary_encode()
        names, type_code = encoded.dictionary.to_pylist(), _ints(encoded.indices)
    else:  # Python rows (the local engine): no pyarrow.array(list), which imports pandas
        names = {}
        type_code = np.fromiter((names.setdefault(t, len(names)) for t in send_type), np.int64,
                                len(send_type))
        names = list(names)
    is_fail = type_code == (names.index("fail") if "fail" in names else -2)
    is_ok = type_code == (names.index("ok") if "ok" in names else -2)
    definite = is_ok & ~_null_mask(send_offset)
    indefinite = ~definite & ~is_fail
    r_off, r_index, r_inv = _ints(read_offset), _ints(read_index), _ints(read_inv)
    n_s, n_r = len(s_off), len(r_off)
    if arrow:
        s_vals, r_vals = _strings(send_value), _strings(read_value)
        if s_vals.null_count or r_vals.null_count:
            return None
        codes = _ints(pa.concat_arrays([s_vals, r_vals]).dictionary_encode().indices)
        s_texts = r_texts = None  # lists only if a window needs the search
    else:
        s_texts, r_texts = send_value, read_value
        ids: dict = {}
        codes = np.fromiter((ids.setdefault(v, len(ids)) for v in (*s_texts, *r_texts)),
                            np.int64, n_s + n_r)
        if None in ids:
            return None
    s_code, r_code = codes[:n_s], codes[n_s:]

    # The log the appends build: offsets 0..m-1, once each (else the search decides).
    a_off = s_off[definite]
    m = len(a_off)
    chain = np.empty(m, np.int64)
    if m:
        order = np.argsort(a_off, kind="stable")
        if not np.array_equal(a_off[order], np.arange(m)):
            return None
        chain[:] = s_code[definite][order]
    # Log.prepare: an indefinite send is dropped when it has no offset to land on: no gap
    # below the top pinned offset (or the end's length) and its value pinned nowhere.
    if indefinite.any():
        pinned = np.union1d(a_off, r_off)
        top = max(int(pinned[-1]) if len(pinned) else -1, (end[0] - 1) if end is not None else -1)
        if (top >= 0 and (pinned[0] != 0 or len(pinned) != top + 1 or pinned[-1] != top)):
            return None  # a gap, where an indefinite send may land
        if np.isin(s_code[indefinite], np.concatenate([chain, r_code])).any():
            return None
    # Polls: one call per completion index, its records by offset.
    if n_r:
        by_poll = np.lexsort((r_off, r_index))
        p_index, p_off, p_code, p_inv = r_index[by_poll], r_off[by_poll], r_code[by_poll], r_inv[by_poll]
        first = np.r_[True, p_index[1:] != p_index[:-1]]
        starts = np.flatnonzero(first)
        if (p_inv != np.repeat(p_inv[starts], np.diff(np.r_[starts, n_r]))).any():
            return None  # one completion with two invocations: not a poll as key_calls pairs it
        if n_r > 1:
            observed = np.union1d(a_off, r_off)
            same = ~first[1:]
            low, high = p_off[:-1][same], p_off[1:][same]
            jump = high - low > 1
            if jump.any():
                between = (np.searchsorted(observed, high[jump], "left")
                           - np.searchsorted(observed, low[jump], "right"))
                if (between > 0).any():
                    return None  # a skip: the search fails it
        # every record must be in the log the appends build
        if ((p_off < 0) | (p_off >= m)).any() or (chain[np.clip(p_off, 0, max(m - 1, 0))] != p_code).any():
            return None
        poll_inv, poll_done = p_inv[starts], p_index[starts]
        poll_top = np.maximum.reduceat(p_off, starts)
        # key_calls' list order: sends as given, then polls by first appearance, then the end
        poll_rank = np.empty(len(starts), np.int64)
        first_seen = np.full(len(starts), n_r, np.int64)
        group = np.cumsum(first) - 1
        np.minimum.at(first_seen, group, by_poll)
        poll_rank[:] = n_s + first_seen
    else:
        poll_inv = poll_done = poll_top = poll_rank = np.empty(0, np.int64)
        starts = np.empty(0, np.int64)
    # The calls after prepare: appends, polls, the end (all definite).
    kind = np.concatenate([np.zeros(m, np.int8), np.ones(len(poll_inv), np.int8),
                           np.full(1 if end is not None else 0, 2, np.int8)])
    inv = np.concatenate([s_inv[definite], poll_inv, [end[1]] if end is not None else []]).astype(np.int64)
    done = np.concatenate([s_done[definite], poll_done, [end[2]] if end is not None else []]).astype(np.int64)
    rank = np.concatenate([np.flatnonzero(definite), poll_rank,
                           [n_s + n_r + 1] if end is not None else []]).astype(np.int64)
    which = np.concatenate([np.flatnonzero(definite), np.arange(len(poll_inv)), [0] if end is not None else []]).astype(np.int64)
    n = len(inv)
    if n == 0:
        return {"valid": True, "calls": 0, "configs": 0}
    if (done < 0).any():
        return None
    # list order (key_calls' stable sort by invocation), then windows as wgl.windows cuts them
    order = np.lexsort((rank, inv))
    kind, inv, done, which = kind[order], inv[order], done[order], which[order]
    reach = np.maximum.accumulate(done)
    new_window = np.r_[True, inv[1:] > reach[:-1]]
    w_start = np.flatnonzero(new_window)
    w_size = np.diff(np.r_[w_start, n])
    is_append = kind == 0
    appends_before = np.cumsum(is_append) - is_append  # appends earlier in list order
    length = appends_before[w_start]  # the log's length when each window starts
    single = (w_size == 1) & (done[w_start] >= inv[w_start])
    s_kind, s_which, s_len = kind[w_start][single], which[w_start][single], length[single]
    if (s_kind == 0).any() and (s_off[s_which[s_kind == 0]] != s_len[s_kind == 0]).any():
        return None
    if (s_kind == 1).any() and (poll_top[s_which[s_kind == 1]] >= s_len[s_kind == 1]).any():
        return None
    if (s_kind == 2).any() and end is not None and (s_len[s_kind == 2] != end[0]).any():
        return None
    configs = 1 + int(single.sum())
    multi = np.flatnonzero(~single)
    if len(multi):
        if s_texts is None:
            s_texts, r_texts = s_vals.to_pylist(), r_vals.to_pylist()
        rows = np.flatnonzero(definite)[np.argsort(a_off, kind="stable")]
        model = _chain_model([s_texts[i] for i in rows])
        for w in multi:
            if deadline is not None and time.monotonic() > deadline:
                return None
            lo, hi = w_start[w], w_start[w] + w_size[w]
            calls = [_call(kind[i], which[i], inv[i], done[i], s_off, s_texts, r_off, r_texts,
                           by_poll if n_r else None, starts, n_r, end) for i in range(lo, hi)]
            start_len = int(length[w])
            found, state = _search(model, calls, deadline, max_configs, start_len)
            if found["valid"] is not True or state != start_len + int(is_append[lo:hi].sum()):
                return None
            configs += found["configs"] - 1
    return {"valid": True, "calls": n, "configs": configs}


def _chain_model(values: list) -> Log:
    """A Log model whose interned states 0..m are the prefixes of the appends' log (node i
    has length i): the states the search reaches from them are the ones it would intern."""
    model = Log()
    m = len(values)
    model._parent = [-1, *range(m)]
    model._value = [None, *values]
    model._length = list(range(m + 1))
    model._child = {(i, v): i + 1 for i, v in enumerate(values)}
    return model


def _call(kind, which, inv, done, s_off, s_texts, r_off, r_texts, by_poll, starts, n_r, end) -> Call:
    """The Call `key_calls` builds for one call of a multi-call window (no ops: a window
    that fails sends the key to the whole search, which builds them for its counterexample)."""
    inv, done = int(inv), int(done)
    if kind == 0:
        return Call(inv, done, "append", (int(s_off[which]), s_texts[which]), None, None)
    if kind == 1:
        hi = starts[which + 1] if which + 1 < len(starts) else n_r
        rows = by_poll[starts[which]:hi]
        records = sorted(((int(r_off[j]), r_texts[j]) for j in rows), reverse=True)
        return Call(inv, done, "read", tuple(records), None, None)
    return Call(inv, done, "end", int(end[0]), None, None)

"""The log checker's counts over column arrays: what each Spark task runs on its keys.

Why: on a 10M-op history the log checker's facts cost Spark a hash aggregation of every
input row and several windows (tens of JVM CPU-s, docs/performance.md); over numpy
arrays of one task's rows they are a few sorts of packed 64-bit integers. Every anomaly
is per key, so a task's answer is complete for its keys, and the answers of disjoint
keys merge by adding counts and sorting examples by key (`merge`).

How it stays equal to `checkers.log_anomalies` (the in-process kernel): only the counts
per key are computed here, each kind by the definition in that module's docstring. The
examples of a kind come from that kernel itself, run on the rows of the first keys (in
key order) that have findings of the kind, until those hold MAX_EXAMPLES; on those keys
the kernel's counts must equal these, which `findings` checks on every call (a
difference raises `checkers.arrays.Disagreement`, never a quiet wrong example).

Inputs: pyarrow tables of one run's sends, reads and ends with the columns of
`history.flatten` (reads may carry `seq`, the read's place in its stream, which the
Parquet store writes: streams that read consecutive offsets are then cleared without a
sort).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkers import arrays
from checkers import log_anomalies as kernel
from checkers.log_anomalies import ANOMALIES, MAX_EXAMPLES
from history.flatten import END_COLUMNS, READ_COLUMNS, SEND_COLUMNS


@dataclass
class Findings:
    """One set of keys' answer: per kind the count and its first examples (the kernel's
    order), the keys of its first undecided-unseen sends (with repeats, in order), and
    whether anything was checked (an acknowledged send or a read)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ANOMALIES, 0))
    examples: dict[str, list] = field(default_factory=dict)
    undecided: int = 0
    undecided_keys: list[int] = field(default_factory=list)
    checked: bool = False

    def result(self) -> dict:
        """The checker's result (`checkers.log_anomalies.summarize`), before absent logs."""
        found = {kind: (self.counts[kind], self.examples.get(kind, [])) for kind in ANOMALIES}
        found["undecided-unseen"] = (self.undecided, sorted(set(self.undecided_keys)))
        return kernel.summarize(found, checked=self.checked)


def merge(parts: list[Findings]) -> Findings:
    """Findings of disjoint sets of keys -> the findings of their union. Every kind lists
    its examples by key first, and a key's examples come from one part, already in order:
    so the first MAX_EXAMPLES of the union are those of the parts' lists, stably sorted
    by key."""
    out = Findings()
    for part in parts:
        for kind in ANOMALIES:
            out.counts[kind] += part.counts[kind]
        out.undecided += part.undecided
        out.checked = out.checked or part.checked
    for kind in ANOMALIES:
        listed = arrays.first_by_key((part.examples.get(kind, []) for part in parts), MAX_EXAMPLES)
        if listed:
            out.examples[kind] = listed
    out.undecided_keys = sorted(k for part in parts for k in part.undecided_keys)[:MAX_EXAMPLES]
    return out


def check_tables(sends: pa.Table, reads: pa.Table, ends: pa.Table) -> dict:
    """The log checker's result of one run's tables: equal to `kernel.check_flat` of their rows."""
    result = findings(sends, reads, ends).result()
    gone = kernel.absent_ends(arrays.rows(ends, END_COLUMNS))
    if gone:
        keys = sorted(gone)
        kernel.absent_losses(result, gone, arrays.rows_of(sends, keys, SEND_COLUMNS),
                             arrays.rows_of(reads, keys, READ_COLUMNS), arrays.rows(ends, END_COLUMNS))
    return result


def findings(sends: pa.Table, reads: pa.Table, ends: pa.Table) -> Findings:
    """Counts per kind over the arrays, examples from the kernel on the first keys."""
    a = _Arrays(sends, reads, ends)
    per_key = a.counts()
    out = Findings(checked=bool(len(a.r_k)) or bool(a.acked.any()))
    needed: set[int] = set()
    for kind in ANOMALIES:
        counts = per_key[kind]
        out.counts[kind] = int(counts.sum())
        needed.update(arrays.first_keys(counts, MAX_EXAMPLES))
    undecided = per_key["undecided-unseen"]
    out.undecided = int(undecided.sum())
    for i in arrays.first_keys(undecided, MAX_EXAMPLES):
        room = MAX_EXAMPLES - len(out.undecided_keys)
        out.undecided_keys += [int(a.keys[i])] * min(int(undecided[i]), room)
    if needed:
        chosen = a.keys[sorted(needed)]
        found, _checked = kernel.findings_flat(arrays.rows_of(sends, chosen, SEND_COLUMNS),
                                               arrays.rows_of(reads, chosen, READ_COLUMNS),
                                               arrays.rows_of(ends, chosen, END_COLUMNS))
        arrays.agree({kind: found[kind] for kind in ANOMALIES}, per_key, sorted(needed), a.keys)
        for kind in ANOMALIES:
            if found[kind][1]:
                out.examples[kind] = found[kind][1][:MAX_EXAMPLES]
    return out


class _Arrays:
    """The run's rows as numpy arrays, keys as their index among its sorted keys."""

    def __init__(self, sends: pa.Table, reads: pa.Table, ends: pa.Table) -> None:
        self.keys, (self.s_k, self.r_k, self.e_k) = arrays.table_keys(sends, reads, ends)
        self.nk = len(self.keys)
        self.s_v, self.r_v = arrays.ids(sends.column("value"), reads.column("value"))
        self.s_o, s_has_o = arrays.ints(sends, "offset")
        kind = sends.column("type")
        self.s_fail = arrays.bools(pc.equal(kind, "fail"))
        self.acked = arrays.bools(pc.equal(kind, "ok")) & (s_has_o if s_has_o is not None else True)
        (self.s_proc,) = arrays.ids(sends.column("process"))
        self.s_inv, _ = arrays.ints(sends, "invoke_index")
        self.s_done, s_done_valid = arrays.ints(sends, "complete_index")
        self.s_at = self.s_done if s_done_valid is None else np.where(s_done_valid, self.s_done, self.s_inv)
        self.r_o, _ = arrays.ints(reads, "offset")
        self.r_index, _ = arrays.ints(reads, "index")
        self.r_pos, _ = arrays.ints(reads, "pos")
        self.r_session, _ = arrays.ints(reads, "session")
        self.r_final = arrays.bools(reads.column("final"))
        self.r_seq = arrays.ints(reads, "seq") if "seq" in reads.column_names else None
        # ends: the last row of a key wins (the kernel's dict of them)
        self.ended = np.zeros(self.nk, bool)
        self.ended[self.e_k] = True
        self.end_offset = np.full(self.nk, np.iinfo(np.int64).max)
        e_off, e_valid = arrays.ints(ends, "end_offset")
        self.end_offset[self.e_k] = np.where(e_valid, e_off, np.iinfo(np.int64).max) if e_valid is not None else e_off

    def counts(self) -> dict[str, np.ndarray]:
        """kind -> findings per key index (undecided-unseen included)."""
        nk = self.nk
        out: dict[str, np.ndarray] = {}

        def per_key(index: np.ndarray) -> np.ndarray:
            return arrays.per_key(index, nk)

        # Observations: acknowledged sends and reads, with 1 = read, 2 = read by a final poll.
        acked = np.flatnonzero(self.acked)
        o_k = np.concatenate([self.s_k[acked], self.r_k])
        o_v = np.concatenate([self.s_v[acked], self.r_v])
        o_o = np.concatenate([self.s_o[acked], self.r_o])
        o_f = np.concatenate([np.zeros(len(acked), np.int8),
                              np.where(self.r_final, 3, 1).astype(np.int8)])
        order = arrays.order(o_k, o_v, o_o)
        o_k, o_v, o_o, o_f = o_k[order], o_v[order], o_o[order], o_f[order]
        first = np.flatnonzero(arrays.starts(o_k, o_v, o_o))        # distinct (k, v, o)
        t_k, t_v, t_o = o_k[first], o_v[first], o_o[first]
        t_f = np.bitwise_or.reduceat(o_f, first) if len(first) else np.zeros(0, np.int8)
        # per (k, v): distinct offsets, read, read by a final poll, lowest offset
        kv_first = np.flatnonzero(arrays.starts(t_k, t_v))
        kv_n = np.diff(np.append(kv_first, len(t_k)))
        kv_k, kv_v = t_k[kv_first], t_v[kv_first]
        kv_f = np.bitwise_or.reduceat(t_f, kv_first) if len(kv_first) else np.zeros(0, np.int8)
        kv_low = t_o[kv_first]
        out["duplicate"] = per_key(kv_k[kv_n > 1])
        # per (k, o): distinct values
        order = arrays.order(t_k, t_o)
        ko_k, ko_o = t_k[order], t_o[order]
        ko_first = np.flatnonzero(arrays.starts(ko_k, ko_o))
        ko_n = np.diff(np.append(ko_first, len(ko_k)))
        out["inconsistent-offsets"] = per_key(ko_k[ko_first][ko_n > 1])

        def kv_lookup(k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """(found, position) of (k, v) pairs among the distinct observed ones."""
            if not len(kv_k):
                return np.zeros(len(k), bool), np.zeros(len(k), np.int64)
            packed_kv = kv_k.astype(np.int64) * (1 << 32) + kv_v
            packed = k.astype(np.int64) * (1 << 32) + v
            at = np.minimum(np.searchsorted(packed_kv, packed), len(packed_kv) - 1)
            return packed_kv[at] == packed, at

        # aborted-read: values of failed sends that a poll read, per (k, v)
        failed = np.flatnonzero(self.s_fail)
        found, at = kv_lookup(self.s_k[failed], self.s_v[failed])
        hit = np.unique(at[found & ((kv_f[at] & 1) == 1)]) if len(at) else at
        out["aborted-read"] = per_key(kv_k[hit])

        # lost-write, unseen, undecided-unseen: acknowledged sends never read
        _, at = kv_lookup(self.s_k[acked], self.s_v[acked])
        read = (kv_f[at] & 1) == 1 if len(at) else np.zeros(0, bool)
        k, o = self.s_k[acked], self.s_o[acked]
        max_read = np.full(nk, np.iinfo(np.int64).min)
        max_final = np.full(nk, -1)
        reads_t = (t_f & 1) == 1
        np.maximum.at(max_read, t_k[reads_t], t_o[reads_t])
        finals_t = (t_f & 2) == 2
        np.maximum.at(max_final, t_k[finals_t], t_o[finals_t])
        has_read = np.zeros(nk, bool)
        has_read[t_k[reads_t]] = True
        lost = ~read & has_read[k] & (o <= max_read[k])
        rest = ~read & ~lost
        out["lost-write"] = per_key(k[lost])
        out["unseen"] = per_key(k[rest & self.ended[k]])
        out["undecided-unseen"] = per_key(k[rest & ~self.ended[k]])
        # read-then-lost: read, not by a final poll, and the final reads reach its offset
        # or the key's end is at or below it
        final = (kv_f[at] & 2) == 2 if len(at) else np.zeros(0, bool)
        reached = (max_final[k] >= o) | (self.ended[k] & (o >= self.end_offset[k]))
        out["read-then-lost"] = per_key(k[read & ~final & reached])

        out.update(self._poll_order(ko_k[ko_first], ko_o[ko_first], per_key))
        out["nonmonotonic-send"] = per_key(self._backward_sends(kv_lookup, kv_f, kv_low))
        out["realtime-order"] = per_key(self._late_sends(acked))
        return out

    def _poll_order(self, kk, ko, per_key) -> dict[str, np.ndarray]:
        """poll-skip and nonmonotonic-poll: consecutive reads of a (key, session) stream
        whose ranks among the key's known offsets (kk, ko: the distinct observed (key
        index, offset), sorted) are not one apart."""
        r = np.arange(len(self.r_k))
        if self.r_seq is not None and len(r):
            seq, seq_valid = self.r_seq
            if seq_valid is None:
                # streams whose offset - seq is constant read consecutive offsets in order
                order = arrays.order(self.r_k, self.r_session, self.r_o - seq)
                sk, ss, sd = self.r_k[order], self.r_session[order], (self.r_o - seq)[order]
                stream_first = arrays.starts(sk, ss)
                mixed = arrays.starts(sk, ss, sd) & ~stream_first
                suspect_at = np.flatnonzero(mixed)
                if not len(suspect_at):
                    zero = np.zeros(self.nk, np.int64)
                    return {"poll-skip": zero, "nonmonotonic-poll": zero.copy()}
                stream_id = np.cumsum(stream_first) - 1
                suspect = np.zeros(stream_id[-1] + 1, bool)
                suspect[stream_id[suspect_at]] = True
                r = np.sort(order[suspect[stream_id]])
        k, session, index, pos, o = (self.r_k[r], self.r_session[r], self.r_index[r],
                                     self.r_pos[r], self.r_o[r])
        order = arrays.order(k, session, index, pos, o)
        k, session, o = k[order], session[order], o[order]
        pair = ~arrays.starts(k, session)          # row i pairs with row i - 1
        pair[0:1] = False
        second = np.flatnonzero(pair)
        first = second - 1
        step = o[second] - o[first]
        odd = step != 1
        second, first = second[odd], first[odd]
        key_start = np.searchsorted(kk, np.arange(self.nk))

        def rank(at):
            packed = arrays.packed([np.concatenate([kk, k[at]]), np.concatenate([ko, o[at]])])
            if packed is None:
                raise OverflowError("offsets too wide to rank")
            table, wanted = packed[:len(kk)], packed[len(kk):]
            return np.searchsorted(table, wanted) - key_start[k[at]]

        delta = rank(second) - rank(first) if len(second) else np.zeros(0, np.int64)
        return {"poll-skip": per_key(k[second][delta > 1]),
                "nonmonotonic-poll": per_key(k[second][delta < 1])}

    def _backward_sends(self, kv_lookup, kv_f, kv_low) -> np.ndarray:
        """Key index of each nonmonotonic-send: a process's placed sends to a key, in op
        order, at a non-increasing offset (not two values of one op)."""
        acked = self.acked
        candidates = np.flatnonzero(~acked & ~self.s_fail)
        found, at = kv_lookup(self.s_k[candidates], self.s_v[candidates])
        placed_read = found & ((kv_f[at] & 1) == 1) if len(at) else np.zeros(0, bool)
        rows = np.concatenate([np.flatnonzero(acked), candidates[placed_read]])
        offset = np.concatenate([self.s_o[acked], kv_low[at[placed_read]]])
        k, proc, op_at = self.s_k[rows], self.s_proc[rows], self.s_at[rows]
        order = arrays.order(k, proc, op_at, offset)
        k, proc, op_at, offset = k[order], proc[order], op_at[order], offset[order]
        pair = ~arrays.starts(k, proc)
        pair[0:1] = False
        second = np.flatnonzero(pair)
        back = (offset[second] <= offset[second - 1]) & (op_at[second] != op_at[second - 1])
        return k[second[back]]

    def _late_sends(self, acked: np.ndarray) -> np.ndarray:
        """Key index of each realtime-order: an acknowledged send invoked after another
        of its key completed at a higher offset (a sweep per key in history order)."""
        n = len(acked)
        if not n:
            return np.zeros(0, np.int64)
        k = np.concatenate([self.s_k[acked], self.s_k[acked]])
        index = np.concatenate([self.s_done[acked], self.s_inv[acked]])
        completion = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])
        offset = np.concatenate([self.s_o[acked], self.s_o[acked]])
        order = arrays.order(k, index, completion)
        k, completion, offset = k[order], completion[order], offset[order]
        low = int(offset.min())
        span = int(offset.max()) - low + 2
        if (int(k.max()) + 1) * span >= 1 << arrays.BITS:
            raise OverflowError("offsets too wide for the sweep")
        base = k.astype(np.int64) * span
        bar = np.maximum.accumulate(np.where(completion == 1, base + 1 + offset - low, base))
        best = bar - base - 1 + low                  # highest offset completed so far (key's own)
        late = (completion == 0) & (bar > base) & (best > offset)
        return k[late]

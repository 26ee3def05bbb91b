"""The replica diff's counts over column arrays: what each Spark task runs on its keys.

Why: the replica diff reads every record of every replica (14.7M rows for a 10M-op run),
which DataFrame jobs grouped and joined in the JVM (~40 JVM CPU-s); over numpy arrays of
one task's rows each fact is a sort of packed 64-bit integers and a bincount per key (the
pattern of `checkers.log_arrays`). Every finding, and every `differences` entry, is per
key, so a task's answer is complete for its keys, and the answers of disjoint keys merge
by adding counts and sorting examples by key (`merge`).

How it stays equal to `checkers.replica_diff` (the in-process kernel): only the counts
per key are computed here, each kind by the definition in that module's docstring, and
those of `differences` as its `differences` lists them. The examples of a kind come from
that kernel itself (`findings_flat`), run on the rows of the first keys (in key order)
whose examples reach MAX_EXAMPLES, and the `differences` entries from its `differences`
on the first keys whose entries reach MAX_DIFFERENCES; on those keys the kernel's counts
must equal these, which `findings` checks on every call (a difference raises
`checkers.arrays.Disagreement`, never a quiet wrong example). The result itself is the kernel's
`summarize` and `with_differences` of the merged findings (`Findings.result`).

Inputs: pyarrow tables of one run's records, replicas and sends with the columns of
`history.flatten` (RECORD_COLUMNS, REPLICA_COLUMNS, SEND_COLUMNS); values are JSON texts,
compared by their ids in one dictionary. Past copies are the nodes `history.flatten.is_past`
names so; the tiered-storage dump `remote` is an ordinary node.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkers import arrays
from checkers import replica_diff as kernel
from checkers.replica_diff import ANOMALIES, MAX_DIFFERENCES, MAX_EXAMPLES
from harness.run_store import PAST_MARK
from history.flatten import RECORD_COLUMNS, REPLICA_COLUMNS, SEND_COLUMNS
from history.parquet import SCHEMAS

__all__ = ["Findings", "merge", "check_tables", "findings"]


@dataclass
class Findings:
    """One set of keys' answer: per kind the count and its first examples (the kernel's
    order), whether a final replica was dumped, and the first `differences` entries with
    how many there are."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ANOMALIES, 0))
    examples: dict[str, list] = field(default_factory=dict)
    has_dumps: bool = False
    differences: list[dict] = field(default_factory=list)
    differences_total: int = 0

    def result(self, complete: bool = True, final_reads: bool = True) -> dict:
        """The checker's result: `checkers.replica_diff.check_flat`'s."""
        found = {kind: (self.counts[kind], copy.deepcopy(self.examples.get(kind, []))) for kind in ANOMALIES}
        result = kernel.summarize(found, has_dumps=self.has_dumps, complete=complete, final_reads=final_reads)
        return kernel.with_differences(result, self.differences_total, copy.deepcopy(self.differences))


def merge(parts: list[Findings]) -> Findings:
    """Findings of disjoint sets of keys -> the findings of their union. Examples and
    differences are listed by key first, and a key's come from one part, already in
    order: so the union's first ones are the parts' lists, stably sorted by key."""
    out = Findings()
    for part in parts:
        for kind in ANOMALIES:
            out.counts[kind] += part.counts[kind]
        out.has_dumps = out.has_dumps or part.has_dumps
        out.differences_total += part.differences_total
    for kind in ANOMALIES:
        listed = arrays.first_by_key((part.examples.get(kind, []) for part in parts), MAX_EXAMPLES)
        if listed:
            out.examples[kind] = listed
    out.differences = arrays.first_by_key((part.differences for part in parts), MAX_DIFFERENCES)
    return out


def check_tables(records: pa.Table, replicas: pa.Table, sends: pa.Table,
                 complete: bool = True, final_reads: bool = True) -> dict:
    """The replica diff's result of one run's tables: equal to `kernel.check_flat` of their rows."""
    return findings(records, replicas, sends).result(complete, final_reads)


def findings(records: pa.Table, replicas: pa.Table, sends: pa.Table) -> Findings:
    """Counts per kind over the arrays, examples from the kernel on the first keys: its
    `findings_flat` on those of the kinds (at most MAX_EXAMPLES keys each), its cheaper
    `differences` alone on those of `differences` (up to MAX_DIFFERENCES keys) unless
    the former included them."""
    records, replicas, sends = (_typed(records, "records", RECORD_COLUMNS),
                                _typed(replicas, "replicas", REPLICA_COLUMNS),
                                _typed(sends, "sends", SEND_COLUMNS))
    a = _Arrays(records, replicas, sends)
    per_key, shown = a.counts()
    out = Findings(has_dumps=a.has_dumps, differences_total=int(per_key["differences"].sum()))
    first = set()
    for kind in ANOMALIES:
        out.counts[kind] = int(per_key[kind].sum())
        first.update(arrays.first_keys(shown[kind], MAX_EXAMPLES))

    def rows(index, table, columns):
        return arrays.rows_of(table, a.keys[index], columns)

    if first:
        index = sorted(first)
        found, _has_dumps, differences = kernel.findings_flat(
            rows(index, records, RECORD_COLUMNS), rows(index, replicas, REPLICA_COLUMNS),
            rows(index, sends, SEND_COLUMNS))
        arrays.agree({**found, "differences": differences}, per_key, index, a.keys)
        for kind in ANOMALIES:
            if found[kind][1]:
                out.examples[kind] = found[kind][1][:MAX_EXAMPLES]
        out.differences = differences[1][:MAX_DIFFERENCES]
    index = arrays.first_keys(per_key["differences"], MAX_DIFFERENCES)
    if not first.issuperset(index):   # else those keys' entries come first in the kernel's
        found = {"differences": kernel.differences(rows(index, records, RECORD_COLUMNS),
                                                   rows(index, replicas, REPLICA_COLUMNS))}
        arrays.agree(found, per_key, index, a.keys)
        out.differences = found["differences"][1][:MAX_DIFFERENCES]
    return out


def _typed(table: pa.Table, name: str, columns: tuple) -> pa.Table:
    """The table's columns, any of type null (all nulls, no type) cast to the store's type."""
    schema = SCHEMAS[name]
    return pa.table({c: table[c].cast(schema.field(c).type) if table[c].type == pa.null() else table[c]
                     for c in columns})


def _any(flags: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per group (rows from each start to the next): whether any flag is set."""
    return np.logical_or.reduceat(flags, starts) if len(starts) else np.zeros(0, bool)


def _varied(k: np.ndarray, o: np.ndarray, *rest: np.ndarray) -> np.ndarray:
    """Key index of each (key, offset) whose rows hold two or more distinct `rest` tuples."""
    order = arrays.order(k, o, *rest)
    columns = [c[order] for c in (k, o, *rest)]
    distinct = arrays.starts(*columns)
    k, o = columns[0][distinct], columns[1][distinct]
    first = np.flatnonzero(arrays.starts(k, o))
    n = np.diff(np.append(first, len(k)))
    return k[first[n > 1]]


class _Arrays:
    """The run's rows as numpy arrays, keys as their index among its sorted keys."""

    def __init__(self, records: pa.Table, replicas: pa.Table, sends: pa.Table) -> None:
        self.keys, (self.r_k, self.p_k, self.s_k) = arrays.table_keys(records, replicas, sends)
        self.nk = len(self.keys)
        self.r_n, self.p_n = arrays.ids(records.column("node"), replicas.column("node"))
        self.r_past = arrays.bools(pc.match_substring(records.column("node"), PAST_MARK))
        self.p_past = arrays.bools(pc.match_substring(replicas.column("node"), PAST_MARK))
        self.r_o, _ = arrays.ints(records, "offset")
        self.r_e, _ = arrays.ints(records, "epoch")
        self.r_v, self.s_v = arrays.ids(records.column("value"), sends.column("value"))
        self.p_hw, _ = arrays.ints(replicas, "hw")
        self.p_ls, _ = arrays.ints(replicas, "log_start")
        self.s_o, s_has_o = arrays.ints(sends, "offset")
        self.acked = arrays.bools(pc.equal(sends.column("type"), "ok")) & (True if s_has_o is None else s_has_o)
        self.has_dumps = bool((~self.p_past).any())

    def counts(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(kind -> findings per key index, `differences` included; kind -> the kernel's
        examples per key index, which for missing-committed are ranges, not offsets)."""
        nk = self.nk

        def per_key(index: np.ndarray) -> np.ndarray:
            return arrays.per_key(index, nk)

        replicated, hw = self._replica_hw()
        final = ~self.r_past
        committed = self.r_o < hw
        out = {"divergence": per_key(_varied(*self._of(committed & final, self.r_k, self.r_o,
                                                        self.r_e, self.r_v))),
               "overwritten": per_key(self._overwritten(committed)),
               "differences": per_key(_varied(*self._of(replicated & final, self.r_k, self.r_o,
                                                         self.r_e, self.r_v)))}
        low, high, ranged = self._committed_ranges()
        missing, gaps = self._missing_committed(low, high, ranged)
        out["missing-committed"] = missing
        out["lost-acknowledged"] = per_key(self._lost_acknowledged(low, ranged))
        shown = dict(out)
        shown["missing-committed"] = per_key(gaps)
        return out, shown

    @staticmethod
    def _of(mask: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
        """The columns' rows where mask is set."""
        at = np.flatnonzero(mask)
        return [c[at] for c in columns]

    def _replica_hw(self) -> tuple[np.ndarray, np.ndarray]:
        """Per record: whether its (node, key) has a replica row, and that row's hw (the
        last row of the pair, as the kernel's dict keeps it; 0 without one)."""
        pair = (self.p_n + 1) * max(self.nk, 1) + self.p_k
        order = np.argsort(pair, kind="stable")
        pair, p_hw = pair[order], self.p_hw[order]
        last = np.append(pair[1:] != pair[:-1], True) if len(pair) else np.zeros(0, bool)
        pair, p_hw = pair[last], p_hw[last]
        wanted = (self.r_n + 1) * max(self.nk, 1) + self.r_k
        if not len(pair):
            return np.zeros(len(wanted), bool), np.zeros(len(wanted), np.int64)
        at = np.minimum(np.searchsorted(pair, wanted), len(pair) - 1)
        found = pair[at] == wanted
        return found, np.where(found, p_hw[at], 0)

    def _overwritten(self, committed: np.ndarray) -> np.ndarray:
        """Key index of each overwritten (key, offset): committed copies of it include a
        final one, and a past one whose value no final committed copy holds."""
        k, o, v, past = self._of(committed, self.r_k, self.r_o, self.r_v, self.r_past)
        order = arrays.order(k, o, v)
        k, o, v, past = k[order], o[order], v[order], past[order]
        kov = np.flatnonzero(arrays.starts(k, o, v))           # distinct (k, o, v)
        has_final, has_past = _any(~past, kov), _any(past, kov)
        k, o = k[kov], o[kov]
        ko = np.flatnonzero(arrays.starts(k, o))              # distinct (k, o)
        replaced = _any(has_final, ko) & _any(has_past & ~has_final, ko)
        return k[ko][replaced]

    def _committed_ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per key index: min log_start and max hw over the final replicas, and whether it has one."""
        final = np.flatnonzero(~self.p_past)
        k = self.p_k[final]
        low = np.full(self.nk, np.iinfo(np.int64).max)
        high = np.full(self.nk, np.iinfo(np.int64).min)
        np.minimum.at(low, k, self.p_ls[final])
        np.maximum.at(high, k, self.p_hw[final])
        ranged = np.zeros(self.nk, bool)
        ranged[k] = True
        return low, high, ranged

    def _missing_committed(self, low, high, ranged) -> tuple[np.ndarray, np.ndarray]:
        """(offsets of the committed range no final copy holds, the ranges they form) per
        key index: the gaps between held offsets, with low - 1 and high as sentinels."""
        k, o = self._of(~self.r_past, self.r_k, self.r_o)
        inside = ranged[k] & (o >= low[k]) & (o < high[k])
        k, o = k[inside], o[inside]
        spans = np.flatnonzero(ranged & (high > low))
        k = np.concatenate([k, spans, spans])
        o = np.concatenate([o, low[spans] - 1, high[spans]])
        order = arrays.order(k, o)
        k, o = k[order], o[order]
        keep = arrays.starts(k, o)
        k, o = k[keep], o[keep]
        pair = np.flatnonzero(k[1:] == k[:-1]) + 1     # row i follows row i - 1 in its key
        gap = o[pair] - o[pair - 1] - 1
        gapped = gap > 0
        missing = np.zeros(self.nk, np.int64)
        np.add.at(missing, k[pair[gapped]], gap[gapped])
        return missing, k[pair[gapped]]

    def _lost_acknowledged(self, low, ranged) -> np.ndarray:
        """Key index of each lost-acknowledged send: ok, placed at or above its key's
        min log_start, its value held by no final copy of its key."""
        width = int(max(self.r_v.max(initial=-1), self.s_v.max(initial=-1))) + 2
        if self.nk * width >= 1 << 63:
            raise OverflowError("too many keys and values to pack")
        k, v = self._of(~self.r_past, self.r_k, self.r_v)
        held = pa.array(k * width + v + 1)
        s_k = self.s_k
        candidate = np.flatnonzero(self.acked & ranged[s_k] & (self.s_o >= low[s_k]))
        s_k = s_k[candidate]
        wanted = pa.array(s_k * width + self.s_v[candidate] + 1)
        # a hash set (~8x faster than np.isin of np.unique on 1.5M rows, measured)
        kept = arrays.bools(pc.is_in(wanted, value_set=held))
        return s_k[~kept]

"""Synthetic Kafka-style histories and replica dumps, and timed runs of both drivers.

`harness bench` calls `run_bench`. The generator writes the flat Parquet
tables of `history.parquet` directly, chunk by chunk with numpy and pyarrow,
so a 10M-op history never exists in memory as Python objects.

The synthetic run. Op j (0 <= j < ops) is invoked at index 2j and completes at
2j+1 (no concurrency, so real-time order is the op order). About half the
ops are sends by producers p0..p{P-1} to a random key; 1% of sends fail and
1% are indefinite (neither is written). An ok send to key k gets the next
offset of k, and the value at (k, o) is k * 10^9 + o + 1, unique per test.
The other ops are polls: a poll of key k by consumer c{k mod C} reads every
offset of k written since that consumer's previous poll of k. Then a nemesis
"final" op, and one final poll per key (consumer f{k mod C}) reads every
offset of k, then comes back empty at k's end (table `ends`). Three
replicas n1..n3 hold every written record, HW = LEO.

Injected anomalies (`inject=n`: n of each kind, each on its own key):
lost-write (every read of one offset dropped), unseen (one extra
acknowledged send after the end of a key, held by replicas, never read),
inconsistent-offsets (a final read returns a foreign value: also
read-then-lost, the replaced value was read before), duplicate (a
final read returns the previous offset's value: also inconsistent and
read-then-lost),
nonmonotonic-poll (a poll re-reads the previous offset: also a skip on the
next poll), poll-skip (a main-phase read dropped), nonmonotonic-send (two
sends of one process swap offsets: also realtime-order), realtime-order (two
sends of different processes swap offsets), aborted-read (an ok send turned
into fail), divergence (n2 holds one record with another epoch),
missing-committed (one offset removed from all replicas: also
lost-acknowledged), lost-acknowledged (all replicas hold another value) and
overwritten (a past copy of n1 held another value, committed).
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.engines.measure import (delta, gib, profiled, task_profiles, jvm_cpu_seconds, jvm_java_version, jvm_peak_rss, python_peak_rss,
                                     read_everything)
from history.parquet import SCHEMAS, TableWriter
from harness.run_store import PAST_MARK

PRODUCERS = 8
CONSUMERS = 8
NODES = ("n1", "n2", "n3")
PAST_NODE = "n1" + PAST_MARK + "1"  # a past copy (checkers.replica_diff, overwritten)
CHUNK_OPS = 1_000_000
FINAL_CHUNK_ROWS = 1_000_000
VALUE_BASE = 1_000_000_000
INJECTED = ("lost-write", "unseen", "inconsistent-offsets", "duplicate", "nonmonotonic-poll",
            "poll-skip", "nonmonotonic-send", "realtime-order", "aborted-read", "divergence",
            "missing-committed", "lost-acknowledged", "overwritten")


def values_of(keys, offsets) -> np.ndarray:
    return keys * VALUE_BASE + offsets + 1


def as_text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values, pa.int64()), pa.string())


def codes(keys, offsets) -> np.ndarray:
    """One int64 per (key, offset), for fast set membership."""
    return np.asarray(keys, np.int64) * (1 << 32) + np.asarray(offsets, np.int64)


class Plan:
    """Which keys and offsets carry which injected anomaly."""

    def __init__(self, keys: int, inject: int) -> None:
        if inject and keys < len(INJECTED) * inject + 1:
            raise ValueError(f"--keys must be at least {len(INJECTED) * inject + 1} "
                             f"to inject {inject} of each of {len(INJECTED)} anomaly kinds")
        self.keys = {kind: list(range(1 + i * inject, 1 + (i + 1) * inject)) if inject else []
                     for i, kind in enumerate(INJECTED)}
        at = 1  # the injected offset within a key
        self.drop_all_reads = codes(self.keys["lost-write"], [at] * inject)
        self.drop_main_reads = codes(self.keys["poll-skip"], [at] * inject)
        self.final_value = {}  # code -> value a final read returns instead
        for n, k in enumerate(self.keys["inconsistent-offsets"]):
            self.final_value[int(codes(k, at))] = -(10 ** 15) - n
        for k in self.keys["duplicate"]:
            self.final_value[int(codes(k, at))] = int(values_of(k, at - 1))
        self.reread_keys = set(self.keys["nonmonotonic-poll"])
        self.reread_done: set[int] = set()
        self.epoch_on_n2 = codes(self.keys["divergence"], [at] * inject)
        self.missing = codes(self.keys["missing-committed"], [at] * inject)
        self.foreign_record = codes(self.keys["lost-acknowledged"], [at] * inject)
        self.overwritten_keys = np.array(self.keys["overwritten"], np.int64)
        self.at = at
        self.unseen_keys = self.keys["unseen"]


def generate(out_dir: str, ops: int, keys: int, inject: int = 0, seed: int = 0,
             run: str = "bench", chunk_ops: int = CHUNK_OPS) -> dict:
    """Write one synthetic run's Parquet dir; -> sizes of the tables written."""
    rng = np.random.default_rng(seed)
    plan = Plan(keys, inject)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    writers = {t: TableWriter(os.path.join(out_dir, f"{t}.parquet"), t, run) for t in SCHEMAS}
    sizes = dict.fromkeys(SCHEMAS, 0)
    ends = np.zeros(keys, np.int64)   # next offset per key
    read_to = np.zeros(keys, np.int64)  # next offset the main consumer of a key reads
    read_seq = np.zeros(keys, np.int64)  # reads of each key's main stream so far
    swapped = set()
    for start in range(0, ops, chunk_ops):
        n = min(chunk_ops, ops - start)
        j = np.arange(start, start + n, dtype=np.int64)
        is_send = rng.random(n) < 0.5
        key = rng.integers(0, keys, n)
        outcome = rng.random(n)
        kind = np.where(outcome < 0.01, "fail", np.where(outcome < 0.02, "info", "ok"))
        ok = is_send & (kind == "ok")
        # Offsets: the running count of ok sends per key, in op order.
        order = np.lexsort((j, key))
        ok_sorted = ok[order]
        key_sorted = key[order]
        counts_before = np.cumsum(ok_sorted) - ok_sorted
        group_start = np.r_[0, np.flatnonzero(np.diff(key_sorted)) + 1]
        first_of_group = np.repeat(counts_before[group_start], np.diff(np.r_[group_start, n]))
        offset_sorted = ends[key_sorted] + counts_before - first_of_group
        offset = np.empty(n, np.int64)
        offset[order] = offset_sorted
        ends += np.bincount(key[ok], minlength=keys)
        sizes["sends"] += _write_sends(writers["sends"], plan, j[is_send], key[is_send],
                                       offset[is_send], kind[is_send], swapped)
        # Polls: each reads [read_to[k], offsets written before it).
        polls = ~is_send
        poll_j, poll_key, poll_end = j[polls], key[polls], offset[polls]
        sizes["reads"] += _write_main_reads(writers["reads"], plan, poll_j, poll_key, poll_end,
                                            read_to, read_seq)
    extra = _write_unseen_sends(writers["sends"], plan, ends, ops)
    sizes["sends"] += extra
    sizes["reads"] += _write_final_reads(writers["reads"], plan, ends, ops)
    sizes["ends"] = _write_ends(writers["ends"], ends, 2 * (ops + extra) + 4 + 2 * keys)
    record_ends = ends.copy()
    for k in plan.unseen_keys:
        record_ends[k] += 1
    sizes["records"], sizes["replicas"] = _write_dumps(writers, plan, record_ends)
    for writer in writers.values():
        writer.close()
    return {"ops": ops + extra + 1 + keys, "keys": keys, "rows": sizes}


def _write_sends(writer, plan, j, key, offset, kind, swapped) -> int:
    offset = np.where(kind == "ok", offset, -1)
    value = np.where(kind == "ok", values_of(key, offset), -(j + 1))
    process = (j % PRODUCERS).astype(str)
    process = np.char.add("p", process)
    kind = kind.copy()
    for k in plan.keys["aborted-read"]:
        hit = np.flatnonzero((key == k) & (kind == "ok") & (offset == 1))
        kind[hit] = "fail"
        offset[hit] = -1
    for k in plan.keys["nonmonotonic-send"]:
        _swap_once(k, key, kind, offset, value, process, same_process=True, swapped=swapped)
    for k in plan.keys["realtime-order"]:
        _swap_once(k, key, kind, offset, value, process, same_process=False, swapped=swapped)
    writer.add_columns({
        "key": key, "value": as_text(value),
        "offset": pa.array(offset, pa.int64(), mask=offset < 0),
        "type": kind, "process": process, "invoke_index": 2 * j, "complete_index": 2 * j + 1})
    return len(j)


def _swap_once(k, key, kind, offset, value, process, same_process, swapped) -> None:
    """Swap (offset, value) of two consecutive ok sends to key k (once per key)."""
    if k in swapped:
        return
    rows = np.flatnonzero((key == k) & (kind == "ok"))
    for a, b in zip(rows, rows[1:]):
        if (process[a] == process[b]) == same_process:
            if same_process:  # b must be a's next send to k by the same process
                between = rows[(rows > a) & (rows < b)]
                if any(process[r] == process[a] for r in between):
                    continue
            offset[a], offset[b] = offset[b], offset[a]
            value[a], value[b] = value[b], value[a]
            swapped.add(k)
            return
    if same_process:  # fall back to the first same-process pair, however far apart
        by_process = {}
        for r in rows:
            if process[r] in by_process:
                a = by_process[process[r]]
                offset[a], offset[r] = offset[r], offset[a]
                value[a], value[r] = value[r], value[a]
                swapped.add(k)
                return
            by_process[process[r]] = r


def stream_positions(key, index, pos, before) -> np.ndarray:
    """seq of each read: its position in its key's stream by (index, pos), after `before[key]`."""
    order = np.lexsort((pos, index, key))
    sorted_keys = key[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_keys)) + 1]
    within = np.arange(len(key)) - np.repeat(starts, np.diff(np.r_[starts, len(key)]))
    seq = np.empty(len(key), np.int64)
    seq[order] = before[sorted_keys] + within
    return seq


def _write_main_reads(writer, plan, poll_j, poll_key, poll_end, read_to, read_seq) -> int:
    # Polls in op order; a poll reads from where the previous poll of its key stopped.
    order = np.lexsort((poll_j, poll_key))
    pj, pk, pe = poll_j[order], poll_key[order], poll_end[order]
    prev_end = np.empty_like(pe)
    same = np.r_[False, pk[1:] == pk[:-1]]
    prev_end[~same] = read_to[pk[~same]]
    prev_end[same] = pe[:-1][same[1:]]
    # A poll may see fewer offsets than exist when its key's counter was behind: clamp.
    start = prev_end
    end = np.maximum(pe, start)
    last = np.r_[~same[1:], True]
    read_to[pk[last]] = end[last]
    counts = end - start
    total = int(counts.sum())
    if total == 0:
        return 0
    row_poll = np.repeat(np.arange(len(pj)), counts)
    within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    key = pk[row_poll]
    offset = start[row_poll] + within
    index = 2 * pj[row_poll] + 1
    keep = ~np.isin(codes(key, offset), np.r_[plan.drop_all_reads, plan.drop_main_reads])
    key, offset, index, within = key[keep], offset[keep], index[keep], within[keep]
    value = values_of(key, offset)
    # nonmonotonic-poll: one poll of each chosen key re-reads its previous offset.
    extra = []
    for k in plan.reread_keys:
        hit = np.flatnonzero((key == k) & (offset >= 1))
        if len(hit) and k not in plan.reread_done:
            h = hit[0]
            extra.append((k, offset[h] - 1, index[h], within[h] + 1_000_000))
            plan.reread_done.add(k)
    if extra:
        ek, eo, ei, ew = (np.array(c, np.int64) for c in zip(*extra))
        key, offset, index = np.r_[key, ek], np.r_[offset, eo], np.r_[index, ei]
        within, value = np.r_[within, ew], np.r_[value, values_of(ek, eo)]
    consumer = key % CONSUMERS
    seq = stream_positions(key, index, within, read_seq)
    read_seq += np.bincount(key, minlength=len(read_seq))
    writer.add_columns({
        "key": key, "offset": offset, "value": as_text(value),
        "process": np.char.add("c", consumer.astype(str)), "index": index,
        "pos": within.astype(np.int32), "session": consumer, "invoke_index": index - 1,
        "final": np.zeros(len(key), bool), "seq": seq})
    return len(key)


def _write_unseen_sends(writer, plan, ends, ops) -> int:
    """One acknowledged send past the end of each unseen key, just before the final phase."""
    keys = np.array(plan.unseen_keys, np.int64)
    if not len(keys):
        return 0
    j = ops + np.arange(len(keys))
    offset = ends[keys]
    writer.add_columns({
        "key": keys, "value": as_text(values_of(keys, offset)), "offset": offset,
        "type": ["ok"] * len(keys), "process": ["p0"] * len(keys),
        "invoke_index": 2 * j, "complete_index": 2 * j + 1})
    return len(keys)


def _key_batches(ends, rows_per_batch):
    """Consecutive key ranges whose offsets total about rows_per_batch."""
    start, total = 0, 0
    for k, n in enumerate(ends):
        total += int(n)
        if total >= rows_per_batch:
            yield start, k + 1
            start, total = k + 1, 0
    if start < len(ends):
        yield start, len(ends)


def _expand(ends, lo, hi):
    keys = np.repeat(np.arange(lo, hi, dtype=np.int64), ends[lo:hi])
    offsets = np.arange(len(keys)) - np.repeat(np.cumsum(ends[lo:hi]) - ends[lo:hi], ends[lo:hi])
    return keys, offsets.astype(np.int64)


def _write_final_reads(writer, plan, ends, ops) -> int:
    final_base = 2 * (ops + len(plan.unseen_keys)) + 1  # index of the nemesis "final" op
    overrides = plan.final_value
    written = 0
    for lo, hi in _key_batches(ends, FINAL_CHUNK_ROWS):
        key, offset = _expand(ends, lo, hi)
        keep = ~np.isin(codes(key, offset), plan.drop_all_reads)
        key, offset = key[keep], offset[keep]
        value = values_of(key, offset)
        if overrides:
            c = codes(key, offset)
            for code, v in overrides.items():
                value[c == code] = v
        writer.add_columns({
            "key": key, "offset": offset, "value": as_text(value),
            "process": np.char.add("f", (key % CONSUMERS).astype(str)),
            "index": final_base + 2 + 2 * key, "pos": offset.astype(np.int32),
            "session": CONSUMERS + key % CONSUMERS,
            "invoke_index": final_base + 1 + 2 * key, "final": np.ones(len(key), bool),
            "seq": stream_positions(key, key, offset, np.zeros(hi, np.int64))})
        written += len(key)
    return written


def _write_ends(writer, ends, after: int) -> int:
    """Each key's final consumer ends with an empty poll at the key's end, invoked at
    index `after` + 2 key (past every final read)."""
    keys = np.arange(len(ends), dtype=np.int64)
    writer.add_columns({"key": keys, "end_offset": ends, "invoke_index": after + 2 * keys,
                        "complete_index": after + 2 * keys + 1, "absent": [None] * len(keys)})
    return len(keys)


def _write_dumps(writers, plan, ends) -> tuple[int, int]:
    records = 0
    for node in NODES:
        for lo, hi in _key_batches(ends, FINAL_CHUNK_ROWS):
            key, offset = _expand(ends, lo, hi)
            c = codes(key, offset)
            keep = ~np.isin(c, plan.missing)
            key, offset, c = key[keep], offset[keep], c[keep]
            value = values_of(key, offset)
            value[np.isin(c, plan.foreign_record)] *= -1
            epoch = np.zeros(len(key), np.int64)
            if node == "n2":
                epoch[np.isin(c, plan.epoch_on_n2)] = 1
            writers["records"].add_columns({
                "node": [node] * len(key), "key": key, "offset": offset, "epoch": epoch,
                "value": as_text(value)})
            records += len(key)
        k = np.arange(len(ends), dtype=np.int64)
        writers["replicas"].add_columns({
            "node": [node] * len(ends), "key": k, "hw": ends, "leo": ends,
            "log_start": np.zeros(len(ends), np.int64)})
    past = _write_past_copy(writers, plan, ends)
    return records + past, len(NODES) * len(ends) + past


def _write_past_copy(writers, plan, ends) -> int:
    """overwritten: n1's copy from before a restart held another value at the injected
    offset of each such key, committed (its HW is the key's end)."""
    key = plan.overwritten_keys
    if not len(key):
        return 0
    offset = np.full(len(key), plan.at, np.int64)
    writers["records"].add_columns({
        "node": [PAST_NODE] * len(key), "key": key, "offset": offset,
        "epoch": np.zeros(len(key), np.int64), "value": as_text(-(10 ** 14) - key)})
    writers["replicas"].add_columns({
        "node": [PAST_NODE] * len(key), "key": key, "hw": np.asarray(ends)[key], "leo": np.asarray(ends)[key],
        "log_start": np.zeros(len(key), np.int64)})
    return len(key)


# ---------------------------------------------------------------------------
# Timed runs


def load_flat(run_dir: str):
    """Parquet -> the in-process kernel's row tuples (what a small run holds in memory)."""
    from history.flatten import (END_COLUMNS, READ_COLUMNS, RECORD_COLUMNS, REPLICA_COLUMNS,
                                  SEND_COLUMNS)

    def rows(table, columns):
        t = pq.read_table(os.path.join(run_dir, f"{table}.parquet"), columns=list(columns))
        return list(zip(*(t.column(c).to_pylist() for c in columns)))

    return (rows("sends", SEND_COLUMNS), rows("reads", READ_COLUMNS),
            rows("records", RECORD_COLUMNS), rows("replicas", REPLICA_COLUMNS),
            rows("ends", END_COLUMNS))


def run_bench(sizes=(1_000_000, 10_000_000), keys: int = 1000, out_dir: str = "bench/out",
              master: str | None = None, local_max_ops: int = 1_000_000, inject: int = 1,
              seed: int = 0, progress=None, repeat: int = 1, profile: bool = True) -> dict:
    """Generate, then time both drivers end to end; ratios against a same-run baseline.

    Baseline: a Spark job that reads every column of every table of the run
    (for the local driver: loading the rows into Python). Reported:
    seconds (the Spark figure is the whole check; anomalies_diff_s and
    linearizability_s are its two parts, which run side by side), ratio to the
    baseline, peak memory of the driver JVM and of this Python process, and the
    anomaly counts (which must match the injections).
    repeat: checks of each size in the same session (the last is reported: warm when > 1).
    profile: keep each path's top cProfile entries (`profile_top`; the Spark check's is the
    driver's side, profiled on its last repetition; the local check is pure Python, so its
    seconds carry the profiler's overhead: pass False for bare timings).
    """
    from checkers import linearizability, log_anomalies, replica_diff
    from checkers.spark.engine import check_runs
    from checkers.spark.tables import read_table
    from checkers.spark.session import spark_session

    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    if isinstance(sizes, int):
        sizes = [sizes]
    report = {"keys": keys, "inject": inject, "master": master or "local[2]", "runs": []}
    spark = spark_session(master)
    for ops in sorted(sizes):
        run_dir = os.path.join(out_dir, f"ops-{ops}")
        t0 = time.perf_counter()
        shape = generate(run_dir, ops, keys, inject=inject, seed=seed, run=f"ops-{ops}")
        gen_s = time.perf_counter() - t0
        progress(f"generated {ops:,} ops in {gen_s:.1f}s: {shape['rows']}")
        t0, c0 = time.perf_counter(), jvm_cpu_seconds(spark)
        rows = sum(read_everything(read_table(spark, [run_dir], t)) for t in SCHEMAS)
        base_s, base_cpu = time.perf_counter() - t0, delta(jvm_cpu_seconds(spark), c0)
        checks, profiles = [], {}
        for attempt in range(max(1, repeat)):
            t0, c0 = time.perf_counter(), jvm_cpu_seconds(spark)
            timings: dict = {}
            with profiled(profiles, "spark_check_driver", profile and attempt == max(1, repeat) - 1):
                found = check_runs([run_dir], [f"ops-{ops}"], spark=spark,
                                   timings=timings)[f"ops-{ops}"]
            spark_s, spark_cpu = time.perf_counter() - t0, delta(jvm_cpu_seconds(spark), c0)
            checks.append(round(spark_s, 1))
        linear_s = found["linearizability"]["seconds"]
        with task_profiles(profiles, "spark_check_tasks", profile):  # one more check, not timed
            if profile:
                check_runs([run_dir], [f"ops-{ops}"], spark=spark)
        entry = {"ops": ops, "rows": shape["rows"], "generate_s": round(gen_s, 1),
                 "spark": {"seconds": round(spark_s, 1), "checks_s": checks,
                           "baseline_s": round(base_s, 1),
                           "ratio": round(spark_s / base_s, 1), "rows_scanned": rows,
                           "anomalies_diff_s": max(timings["checkers_s"][n] for n in ("log", "replica-diff")),
                           "jvm_cpu_s": spark_cpu, "baseline_jvm_cpu_s": base_cpu,
                           "load_avg_1m": os.getloadavg()[0],
                           "jvm_peak_gib": gib(jvm_peak_rss(spark)),
                           "java": jvm_java_version(spark),
                           "python_peak_gib": gib(python_peak_rss()),
                           "linearizability_s": linear_s,
                           "linearizable": found["linearizability"]["valid"],
                           "log_counts": {k: v for k, v in found["log"]["counts"].items() if v},
                           "diff_counts": {k: v for k, v in found["replica-diff"]["counts"].items()
                                           if v}},
                 "profile_top": profiles}
        progress(f"spark {ops:,} ops: {entry['spark']}")
        report["runs"].append(entry)
    for entry in report["runs"]:
        if entry["ops"] > local_max_ops:
            continue
        run_dir = os.path.join(out_dir, f"ops-{entry['ops']}")
        t0 = time.perf_counter()
        sends, reads, records, replicas, ends = load_flat(run_dir)
        base_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with profiled(entry["profile_top"], "local_anomalies_diff", profile):
            log = log_anomalies.check_flat(sends, reads, ends)
            diff = replica_diff.check_flat(records, replicas, sends)
        local_s = time.perf_counter() - t0
        with profiled(entry["profile_top"], "local_linearizability", profile):
            linear = linearizability.check_flat(sends, reads, ends)
        entry["local"] = {"seconds": round(local_s, 1), "baseline_s": round(base_s, 1),
                          "ratio": round(local_s / base_s, 1),
                          "linearizability_s": linear["seconds"],
                          "linearizability_ratio": round(linear["seconds"] / base_s, 1),
                          "same_linearizability": linear["valid"] == entry["spark"]["linearizable"],
                          "python_peak_gib": gib(python_peak_rss()),
                          "same_as_spark": (log["counts"], diff["counts"]) == (
                              {**dict.fromkeys(log_anomalies.ANOMALIES, 0),
                               **entry["spark"]["log_counts"]},
                              {**dict.fromkeys(replica_diff.ANOMALIES, 0),
                               **entry["spark"]["diff_counts"]})}
        progress(f"local {entry['ops']:,} ops: {entry['local']}")
        del sends, reads, records, replicas, ends
    return report

"""Synthetic transactional histories (Jepsen's queue ops) with each txn-checker anomaly
injected, for the bench (`bench/txn_check.py`) and the engines' differential test.

Transaction j is invoked at index 2j and completes at 2j+1 (one at a time, so
real-time order is their order), by process j mod PROCESSES. Half send 1-3
values to random keys (each gets the key's next offset; value = key * 10^9 +
offset + 1, unique), half poll one key from the process's position (up to 4
records). 4% are aborted (`fail`: their records take offsets no one reads,
like Kafka's aborted records under read_committed), 2% indefinite (`info`),
half of which were committed (their records are polled later, which proves it),
half not (never read).

`inject` of each kind in INJECTED, spread over the history, each on its own key:
G1a (a poll reads an aborted value), precommitted-read (a transaction polls its
own send), txn-lost-write (every read of one committed value dropped),
txn-duplicate (a value read again at an aborted record's offset),
txn-inconsistent-offsets (a foreign value read at a committed offset),
G0 (two transactions' sends to two keys cross), G0-process / G0-realtime
(a later transaction's send lands below an earlier one's, same process /
another), G1c (two transactions read each other's sends), G1c-process /
G1c-realtime (a transaction reads the send of the next transaction of its
process / of another process).
"""
from __future__ import annotations

import random
from collections import defaultdict
from typing import Iterator

PROCESSES = 16
KEYS = 1000
VALUE_BASE = 1_000_000_000
INJECTED = ("G1a", "precommitted-read", "txn-lost-write", "txn-duplicate", "txn-inconsistent-offsets",
            "G0", "G0-process", "G0-realtime", "G1c", "G1c-process", "G1c-realtime")


def history(txns: int, seed: int = 0, inject: int = 1, keys: int = KEYS) -> Iterator[dict]:
    """The ops of a history of about `txns` transactions (plus 2 per injected anomaly)."""
    rng = random.Random(seed)
    plan = {}
    slots = max(1, len(INJECTED) * inject)
    for i in range(slots):  # where each injection happens: spread evenly
        plan[(i + 1) * txns // (slots + 1)] = INJECTED[i % len(INJECTED)]
    special = set(range(keys - slots, keys))  # one key per injection, untouched otherwise
    ordinary = keys - slots
    offsets = [0] * keys
    visible: dict[int, list] = defaultdict(list)   # key -> committed (offset, value) in order
    position: dict[tuple, int] = defaultdict(int)  # (process, key) -> index into visible[key]
    aborted_at: dict[int, int] = {}                # key -> an aborted record's offset
    index = 0
    special_keys = iter(sorted(special))

    def op(kind, process, value, j):
        return {"index": j, "type": kind, "process": process, "f": "txn", "value": value}

    def send(key):
        offset = offsets[key]
        offsets[key] += 1
        return offset, key * VALUE_BASE + offset + 1

    j = 0
    while j < txns:
        if j in plan:
            yield from _inject(plan[j], next(special_keys), index, send, aborted_at)
            index += 8
            j += 1
            continue
        process = j % PROCESSES
        roll = rng.random()
        if roll < 0.5:
            sent = [(key, *send(key)) for key in rng.sample(range(ordinary), rng.randint(1, 3))]
            fate = rng.random()
            invoke = [["send", k, v] for k, _o, v in sent]
            yield op("invoke", process, invoke, index)
            if fate < 0.04:
                yield op("fail", process, invoke, index + 1)
                for k, o, _v in sent:
                    aborted_at[k] = o
            elif fate < 0.05:
                yield op("info", process, invoke, index + 1)
                for k, o, v in sent:  # committed after all: read later, if polled
                    visible[k].append((o, v))
            elif fate < 0.06:
                yield op("info", process, invoke, index + 1)  # never read: indefinite
                for k, o, _v in sent:
                    aborted_at[k] = o
            else:
                yield op("ok", process, [["send", k, [o, v]] for k, o, v in sent], index + 1)
                for k, o, v in sent:
                    visible[k].append((o, v))
        else:
            key = rng.randrange(ordinary)
            start = position[(process, key)]
            pairs = [[o, v] for o, v in visible[key][start:start + 4]]
            position[(process, key)] = start + len(pairs)
            yield op("invoke", process, [["poll"]], index)
            yield op("ok", process, [["poll", {key: pairs}]], index + 1)
        index += 2
        j += 1


def _inject(kind: str, key: int, index: int, send, aborted_at) -> Iterator[dict]:
    """Up to 4 transactions (indices index..index+7) showing one anomaly on `key` (and key2 = a
    second value range of the same key for the two-key kinds: offsets there are the key's own)."""
    a, b = 1000 + 2 * (index % 7), 1001 + 2 * (index % 7)  # processes of their own
    t = index

    def txn(process, invoke, kind_, done, at):
        return [{"index": at, "type": "invoke", "process": process, "f": "txn", "value": invoke},
                {"index": at + 1, "type": kind_, "process": process, "f": "txn", "value": done}]

    if kind == "G1a":
        o, v = send(key)
        yield from txn(a, [["send", key, v]], "fail", [["send", key, v]], t)
        yield from txn(b, [["poll"]], "ok", [["poll", {key: [[o, v]]}]], t + 2)
    elif kind == "precommitted-read":
        o, v = send(key)
        yield from txn(a, [["send", key, v], ["poll"]], "ok", [["send", key, [o, v]], ["poll", {key: [[o, v]]}]], t)
    elif kind == "txn-lost-write":
        o1, v1 = send(key)
        o2, v2 = send(key)
        yield from txn(a, [["send", key, v1], ["send", key, v2]], "ok",
                       [["send", key, [o1, v1]], ["send", key, [o2, v2]]], t)
        yield from txn(b, [["poll"]], "ok", [["poll", {key: [[o2, v2]]}]], t + 2)
    elif kind == "txn-duplicate":
        o0, v0 = send(key)
        o1, v1 = send(key)
        yield from txn(a, [["send", key, v0]], "fail", [["send", key, v0]], t)
        yield from txn(a, [["send", key, v1]], "ok", [["send", key, [o1, v1]]], t + 2)
        yield from txn(b, [["poll"]], "ok", [["poll", {key: [[o0, v1], [o1, v1]]}]], t + 4)
    elif kind == "txn-inconsistent-offsets":
        o, v = send(key)
        yield from txn(a, [["send", key, v]], "ok", [["send", key, [o, v]]], t)
        yield from txn(b, [["poll"]], "ok", [["poll", {key: [[o, v]]}]], t + 2)
        yield from txn(b, [["poll"]], "ok", [["poll", {key: [[o, -v]]}]], t + 4)
    elif kind == "G0":  # a: key@0 then key@3; b: key@1 then key@2 -> a<b (0<1), b<a (2<3)
        (o0, v0), (o1, v1), (o2, v2), (o3, v3) = send(key), send(key), send(key), send(key)
        yield from txn(a, [["send", key, v0], ["send", key, v3]], "ok", [["send", key, [o0, v0]], ["send", key, [o3, v3]]], t)
        yield from txn(b, [["send", key, v1], ["send", key, v2]], "ok", [["send", key, [o1, v1]], ["send", key, [o2, v2]]], t + 2)
    elif kind in ("G0-process", "G0-realtime"):
        (o0, v0), (o1, v1) = send(key), send(key)
        second = a if kind == "G0-process" else b
        yield from txn(a, [["send", key, v1]], "ok", [["send", key, [o1, v1]]], t)
        yield from txn(second, [["send", key, v0]], "ok", [["send", key, [o0, v0]]], t + 2)
    elif kind == "G1c":  # a sends v0, b sends v1; each reads the other's
        (o0, v0), (o1, v1) = send(key), send(key)
        yield {"index": t, "type": "invoke", "process": a, "f": "txn", "value": [["send", key, v0], ["poll"]]}
        yield {"index": t + 1, "type": "invoke", "process": b, "f": "txn", "value": [["send", key, v1], ["poll"]]}
        yield {"index": t + 2, "type": "ok", "process": a, "f": "txn",
               "value": [["send", key, [o0, v0]], ["poll", {key: [[o1, v1]]}]]}
        yield {"index": t + 3, "type": "ok", "process": b, "f": "txn",
               "value": [["send", key, [o1, v1]], ["poll", {key: [[o0, v0]]}]]}
    elif kind in ("G1c-process", "G1c-realtime"):
        o, v = send(key)
        second = a if kind == "G1c-process" else b
        yield from txn(a, [["poll"]], "ok", [["poll", {key: [[o, v]]}]], t)
        yield from txn(second, [["send", key, v]], "ok", [["send", key, [o, v]]], t + 2)
    else:
        raise ValueError(f"no injection for {kind}")


def flat_rows(ops) -> "Iterator[tuple[list, list]]":
    """(send rows, read rows) of the generator's ops, in checkers' flat columns
    (history.flatten; reads with `seq`), without the Flattener's per-op checks and
    bookkeeping: for the bench, whose histories have one shape (no reassignments,
    one consumer session per process), so a 10M-transaction table is written in
    minutes rather than hours on a loaded machine. The differential test feeds the
    same ops through the real Flattener."""
    open_ops: dict = {}
    seq: dict = defaultdict(int)
    for op in ops:
        process, index = op["process"], op["index"]
        if op["type"] == "invoke":
            open_ops[process] = op
            continue
        invoke = open_ops.pop(process)
        sends, reads = [], []
        done = op["value"] if op["type"] == "ok" else invoke["value"]
        for mop in done:
            if mop[0] == "send":
                offset, value = mop[2] if op["type"] == "ok" else (None, mop[2])
                sends.append((mop[1], str(value), offset, op["type"], str(process), invoke["index"], index))
            elif op["type"] == "ok" and len(mop) == 2:
                for key, pairs in mop[1].items():
                    for pos, (offset, value) in enumerate(pairs):
                        seq[(process, key)] += 1
                        reads.append((key, offset, str(value), str(process), index, pos, process, invoke["index"],
                                      False, seq[(process, key)]))
        yield sends, reads


def write_parquet(run_dir: str, run: str, txns: int, seed: int = 0, inject: int = 1) -> None:
    """The run's Parquet tables (history.parquet's schemas) straight from the generator."""
    import os

    from history.parquet import TableWriter

    os.makedirs(run_dir, exist_ok=True)
    writers = {table: TableWriter(os.path.join(run_dir, f"{table}.parquet"), table, run)
               for table in ("sends", "reads", "records", "replicas", "ends")}
    try:
        _add_rows(writers, flat_rows(history(txns, seed=seed, inject=inject)))
    finally:
        for writer in writers.values():
            writer.close()


def _add_rows(writers: dict, rows) -> None:
    """Flattened (sends, reads) row batches into their two table writers."""
    for sends, reads in rows:
        if sends:
            writers["sends"].add(sends)
        if reads:
            writers["reads"].add(reads)


def write_tables(run_dir: str, run: str, txns: int, seed: int = 0, inject: int = 1, keys: int = KEYS) -> None:
    """The bench's tables at numpy speed: a history of the same make as `history`
    (sequential transactions, half sends of 1-3 values, half polls; 4% aborted, 1%
    indefinite and read later, 1% indefinite never read), where every committed
    value is read by one of the next few polls (a poll reads several keys), then
    the injected transactions of `history` (every kind, `inject` times) after the
    last one. Written in row groups straight from arrays: a 10M-transaction run in
    about a minute, where the per-op generator takes an hour on a loaded machine."""
    import os

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from history.parquet import TableWriter

    rng = np.random.default_rng(seed)
    slots = len(INJECTED) * inject
    ordinary = keys - slots
    j = np.arange(txns, dtype=np.int64)
    is_send = rng.random(txns) < 0.5
    senders = j[is_send]
    width = rng.integers(1, 4, len(senders))
    writer = np.repeat(senders, width)
    key = rng.integers(0, ordinary, len(writer))
    order = np.argsort(key, kind="stable")               # offsets: per key, in transaction order
    starts = np.r_[0, np.flatnonzero(np.diff(key[order])) + 1]
    counts = np.diff(np.r_[starts, len(order)])
    offset = np.empty(len(writer), dtype=np.int64)
    offset[order] = np.arange(len(order)) - np.repeat(starts, counts)
    value = key * VALUE_BASE + offset + 1
    fate = rng.random(len(senders))
    kind_of_txn = np.select([fate < 0.04, fate < 0.05, fate < 0.06], [1, 2, 3], 0)  # ok, fail, info read, info unread
    kind = np.repeat(kind_of_txn, width)
    process = writer % PROCESSES
    type_text = np.array(["ok", "fail", "info", "info"])[kind]
    committed = (kind == 0) | (kind == 2)
    polls = j[~is_send]
    after = np.searchsorted(polls, writer[committed], side="right") + rng.integers(0, 3, int(committed.sum()))
    readable = after < len(polls)
    reader = polls[after[readable]]
    r_key, r_offset, r_value = key[committed][readable], offset[committed][readable], value[committed][readable]
    r_order = np.lexsort((r_offset, r_key, reader))
    reader, r_key, r_offset, r_value = reader[r_order], r_key[r_order], r_offset[r_order], r_value[r_order]
    r_process = reader % PROCESSES
    group = np.r_[True, (np.diff(reader) != 0) | (np.diff(r_key) != 0)]
    group_start = np.maximum.accumulate(np.where(group, np.arange(len(reader)), 0))
    pos = np.arange(len(reader)) - group_start
    stream = np.lexsort((reader, r_key, r_process))  # seq: reads so far of (session = process, key)
    s_first = np.r_[True, (np.diff(r_process[stream]) != 0) | (np.diff(r_key[stream]) != 0)]
    s_start = np.maximum.accumulate(np.where(s_first, np.arange(len(stream)), 0))
    seq = np.empty(len(reader), dtype=np.int64)
    seq[stream] = np.arange(len(stream)) - s_start + 1

    os.makedirs(run_dir, exist_ok=True)
    writers = {table: TableWriter(os.path.join(run_dir, f"{table}.parquet"), table, run)
               for table in ("sends", "reads", "records", "replicas", "ends")}
    text = lambda numbers: pc.cast(pa.array(numbers), pa.string())  # noqa: E731
    try:
        writers["sends"].add_columns({
            "key": key, "value": text(value), "offset": pa.array(np.where(kind == 0, offset, 0),
                                                                 mask=kind != 0),
            "type": pa.array(type_text), "process": text(process),
            "invoke_index": 2 * writer, "complete_index": 2 * writer + 1})
        writers["reads"].add_columns({
            "key": r_key, "offset": r_offset, "value": text(r_value), "process": text(r_process),
            "index": 2 * reader + 1, "pos": pos.astype(np.int32), "session": r_process,
            "invoke_index": 2 * reader, "final": np.zeros(len(reader), dtype=bool), "seq": seq})
        specials = iter(range(ordinary, keys))
        offsets = [0] * keys

        def send(k):
            offsets[k] += 1
            return offsets[k] - 1, k * VALUE_BASE + offsets[k]

        start = 2 * txns
        for n, name in enumerate(INJECTED * inject):
            _add_rows(writers, flat_rows(_inject(name, next(specials), start + 8 * n, send, {})))
    finally:
        for w in writers.values():
            w.close()

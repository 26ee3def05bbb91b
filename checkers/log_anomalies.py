"""Per-key log anomalies of a Kafka-style history, after Jepsen's Kafka checker.

The in-process kernel: plain Python over the flat tables of `history.flatten`.
`checkers.log_arrays` computes the same counts over column arrays (the Spark engine's
tasks run it on the keys dealt to them, `checkers.spark.log_anomalies`) and takes its examples from
this kernel; tests hold the two to identical output.

Vocabulary. A *key* is a partition. An *observation* of a key is an
(offset, value) pair seen either in the acknowledgement of an ok send or in an
ok poll. The *known offsets* of a key are the distinct offsets of its
observations; the *rank* of an offset is its position among them (Jepsen's
dense "index" in the version order: gaps in offsets that nobody observed do
not count as skips). A value is *read* if some ok poll returned it for that
key. `max_read_offset` of a key is the highest offset any ok poll returned.
Values are unique per test (the workload sends each once), so a value names
its send.

Anomalies (each counted per finding; examples are the first 20 in the order
given, identical in both engines):

- inconsistent-offsets: observations of one (key, offset) carry two or more
  different values. Jepsen: version-order errors; same, but we only use ok
  polls (our failed/info polls return no data). Per (key, offset); order key,
  offset.
- duplicate: one value of a key observed at two or more offsets. Jepsen:
  duplicate-cases. Per (key, value); order key, value text.
- aborted-read: an ok poll read a value whose send definitely failed
  (type fail). Jepsen: G1a. Per (key, value); order key, value text.
- lost-write: an ok send (offset o) whose value was never read although some
  poll read offset >= o of that key. Jepsen computes the bound from the first
  offset of each read value; we use the highest offset read, which differs
  only when values are duplicated (reported separately as duplicate).
  `info` sends are never lost: they may not have happened. Per send; order
  key, offset, value.
- unseen: an ok send whose value was never read and whose offset is above
  every offset read on that key (or the key was never read). Jepsen reports
  the final unseen count; final-phase polls read every key to its end, so any
  unseen send is an error -- when they did: on a key whose final reads did not
  complete (no end row, see `history.flatten`: the run was interrupted before
  the final phase, or its reads timed out) such a send is undecided, not
  unseen: it is counted under `unknown` with the reason, and the verdict is
  "unknown" unless something else is wrong. Per send; order key, offset, value.
- read-then-lost: an ok send whose value some poll read, that the final reads
  do not contain although they reach its offset (some final read of the key
  returned an offset >= it) or end at or below it (the key's end row: the log
  was cut back below the record, a truncated tail). Acknowledged, seen by a
  consumer, then gone: a committed write removed later (era hw's truncation
  after a restart). Per send; order key, offset, value; ops: the ack and the
  first poll that read it.
- nonmonotonic-poll / poll-skip: within one consumer session (one process,
  between consumer resets, see `history.flatten`), the consecutive pairs of
  offsets read for a key, in history order and then position within a poll.
  delta = rank(second) - rank(first); delta < 1 (backwards or the same offset
  again) is nonmonotonic-poll, delta > 1 (it jumped over a known offset) is
  poll-skip. Jepsen splits pairs inside one poll (int-*) from pairs across
  polls; we report both under one name since our polls stream one key per
  consumer. Per pair; order key, second index, second pos, session.
- nonmonotonic-send: one process's consecutive sends to a key, in the order
  of its ops, landed at non-increasing offsets. Jepsen compares ranks, which
  order like offsets. A send lands at its acknowledged offset; a send without
  one (info, or ok without an offset) whose value a poll read lands at the
  lowest offset its value was observed at, and is skipped otherwise. Why
  placing it is sound: values are unique per key and a client never sends a
  timed-out value again, so the record a read shows with that value is the
  one this op sent; the process invoked its next send after this op ended,
  and a log that keeps a producer's order (Kafka's idempotent producer does,
  retries included) puts that record first. So a timed-out send read back
  above a later send is the same reordering as two acknowledged ones, and
  Jepsen reports it too (it orders info sends by their values' place in the
  version order). A process's sends are ordered whatever its consumer does:
  an assign or subscribe changes nothing here. Ops are ordered by completion
  (by invocation for one that never completed); sends of one op (Jepsen's
  multi-key sends) are not compared with each other. Per pair; order key,
  second op's completion (or invocation) index.
- realtime-order: an ok send B whose offset is lower than that of an ok send A
  to the same key that completed before B was invoked (history index order).
  Jepsen finds these as G0-realtime cycles with Elle; this is the direct
  per-key form. Per send B; the example names the A with the highest offset
  (ties: the later completion). Order key, B's invoke index, B's offset (one
  op may send several values to a key).

Keys whose log was gone after recovery (an end row with `absent`, see
`history.flatten`): the final phase settles a key as gone when, with the
cluster healthy, the system answers definitively that its log does not exist
(harness.sut.AbsentError). A log that does not exist holds none of the key's
acknowledged sends, so every one is `lost-write` (`absent_losses`, run by
both engines on their summarized result): the unseen and read-then-lost ones
of such a key move, the ones read earlier (no anomaly otherwise) are added,
each new example names the acknowledgement and the poll that found the log
gone (`absent`: the system's answer). The result gets `absent` (key ->
answer) and `lost_with_absent_logs` (the sends moved or added).

valid: False if any count is positive; "unknown" if the history has no ok send
and no read (nothing was checked); True otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from history.flatten import decode_value, encode_value, flatten
from checkers.vocabulary import of_checker

ANOMALIES = of_checker("log")
UNDECIDED_UNSEEN = ("acknowledged sends above the last read of keys whose final reads did not "
                    "complete (the run was interrupted before the final phase, or its reads "
                    "timed out)")
MAX_EXAMPLES = 20
MAX_OPS = 10  # history indices listed per example


def check(ops: Iterable[dict]) -> dict:
    """Check a history (list of op dicts as in history.jsonl)."""
    flat = flatten(ops)
    sends, reads, _stats = flat
    return check_flat(sends, reads, flat.ends)


def check_flat(sends: list[tuple], reads: list[tuple], ends: list[tuple]) -> dict:
    """Check flat send, read and end rows (columns as in history.flatten)."""
    findings, checked = findings_flat(sends, reads, ends)
    result = summarize(findings, checked=checked)
    gone = absent_ends(ends)
    if gone:
        absent_losses(result, gone, [s for s in sends if s[0] in gone], [r for r in reads if r[0] in gone], ends)
    return result


def findings_flat(sends: list[tuple], reads: list[tuple], ends: list[tuple]) -> tuple[dict, bool]:
    """-> ({kind: (count, sorted examples)}, whether anything was checked), before
    `summarize` and the absent logs: what `checkers.log_arrays` compares its counts with."""
    findings = {
        "inconsistent-offsets": _inconsistent_offsets(sends, reads),
        "duplicate": _duplicates(sends, reads),
        "aborted-read": _aborted_reads(sends, reads),
        "nonmonotonic-send": _nonmonotonic_sends(sends, reads),
        "realtime-order": _realtime_order(sends),
    }
    findings.update(_lost_and_unseen(sends, reads, {row[0] for row in ends}))
    findings.update(_poll_order(sends, reads))
    findings["read-then-lost"] = _read_then_lost(sends, reads, {row[0]: row[1] for row in ends})
    return findings, bool(reads) or any(s[3] == "ok" and s[2] is not None for s in sends)


def absent_ends(ends: Iterable[tuple]) -> dict[int, tuple[str, int]]:
    """key -> (the system's answer, index of the final poll that got it), of keys found gone."""
    return {row[0]: (row[4], row[3]) for row in ends if len(row) > 4 and row[4] is not None}


def absent_losses(result: dict, gone: dict[int, tuple[str, int]], sends: list[tuple],
                  reads: list[tuple], ends: Iterable[tuple]) -> None:
    """Count every acknowledged send to a key whose log was gone as lost-write (module
    docstring). sends, reads, ends: the flat rows of those keys only, so the kernels'
    own passes over them say what they counted there. In place; both engines."""
    ends = [row for row in ends if row[0] in gone]
    kernel = _lost_and_unseen(sends, reads, {row[0] for row in ends})
    already = {(e[0], e[1], e[2]) for e in _lost_rows(sends, reads)}
    read_then_lost = _read_then_lost(sends, reads, {row[0]: row[1] for row in ends})[0]
    max_read: dict[int, int] = {}
    for key, offset, *_ in reads:
        max_read[key] = max(offset, max_read.get(key, offset))
    new = sorted((key, offset, value, done) + gone[key] for key, value, offset, kind, _p, _inv, done in sends
                 if kind == "ok" and offset is not None and (key, offset, value) not in already)
    counts, examples = result["counts"], result["examples"]
    counts["unseen"] -= kernel["unseen"][0]
    counts["read-then-lost"] -= read_then_lost
    for name in ("unseen", "read-then-lost"):
        kept = [e for e in examples.get(name, []) if int(e.get("key", -1)) not in gone]
        if kept:
            examples[name] = kept
        else:
            examples.pop(name, None)
    counts["lost-write"] += len(new)
    lost = list(examples.get("lost-write", []))
    lost += [{"key": k, "value": decode_value(v), "offset": o, "max_read_offset": max_read.get(k),
              "absent": why, "ops": [done, poll]} for k, o, v, done, why, poll in new[:MAX_EXAMPLES]]
    lost.sort(key=lambda e: (e["key"], e["offset"], str(e["value"])))
    if lost:
        examples["lost-write"] = lost[:MAX_EXAMPLES]
    result["absent"] = {str(k): why for k, (why, _i) in sorted(gone.items())}
    result["lost_with_absent_logs"] = len(new)
    if counts["lost-write"]:
        result["valid"] = False


def lost_sends(sends: list[tuple], reads: list[tuple], ends: list[tuple]) -> list[dict]:
    """Every acknowledged send this checker finds lost (lost-write, unseen, read-then-lost,
    and those to keys whose log was gone), not only the examples: {key, offset, value, op
    (the acknowledgement's index), anomaly}, in key, offset order. A scenario's list of
    lost writes is this, so it and the checker's counts are one definition."""
    found = _lost_and_unseen(sends, reads, {row[0] for row in ends}, limit=None)
    found["read-then-lost"] = _read_then_lost(sends, reads, {row[0]: row[1] for row in ends}, limit=None)
    out = {}
    for name in ("lost-write", "unseen", "read-then-lost"):
        for e in found[name][1]:
            out[(e["key"], e["offset"], encode_value(e["value"]))] = {
                "key": e["key"], "offset": e["offset"], "value": e["value"], "op": e["ops"][0], "anomaly": name}
    gone = absent_ends(ends)
    for key, value, offset, kind, _p, _inv, done in sends:
        if key in gone and kind == "ok" and offset is not None:
            out[(key, offset, value)] = {"key": key, "offset": offset, "value": decode_value(value), "op": done,
                                         "anomaly": "lost-write", "absent": gone[key][0]}
    return [out[k] for k in sorted(out, key=lambda k: (k[0], k[1], k[2]))]


def _lost_rows(sends, reads) -> list[tuple]:
    """(key, offset, value) of the sends the kernel counts as lost-write."""
    read_values = {(r[0], r[2]) for r in reads}
    max_read: dict[int, int] = {}
    for key, offset, *_ in reads:
        max_read[key] = max(offset, max_read.get(key, offset))
    return [(key, offset, value) for key, value, offset, kind, *_ in sends
            if kind == "ok" and offset is not None and (key, value) not in read_values
            and key in max_read and offset <= max_read[key]]


def summarize(findings: dict[str, tuple[int, list]], checked: bool) -> dict:
    """{type: (count, sorted examples)} -> the checker result dict.

    findings may carry "undecided-unseen" (count, keys): sends that would be
    unseen on keys whose final reads did not complete.
    """
    counts = {name: findings[name][0] for name in ANOMALIES}
    examples = {name: findings[name][1][:MAX_EXAMPLES] for name in ANOMALIES if counts[name]}
    undecided, keys = findings.get("undecided-unseen", (0, []))
    if any(counts.values()):
        valid = False
    elif undecided:
        valid = "unknown"
    else:
        valid = True if checked else "unknown"
    result = {"valid": valid, "counts": counts, "examples": examples}
    if undecided:
        result["unknown"] = {"unseen": {"count": undecided, "keys": sorted(keys),
                                        "reason": UNDECIDED_UNSEEN}}
    return result


def _observations(sends, reads):
    """(key, offset, value, op index) of ok acknowledgements and reads."""
    for key, value, offset, kind, _p, _inv, done in sends:
        if kind == "ok" and offset is not None:
            yield key, offset, value, done
    for key, offset, value, _p, index, *_ in reads:
        yield key, offset, value, index


def _inconsistent_offsets(sends, reads):
    by_offset = defaultdict(lambda: (set(), set()))
    for key, offset, value, index in _observations(sends, reads):
        values, ops = by_offset[(key, offset)]
        values.add(value)
        ops.add(index)
    found = sorted(
        (key, offset, values, ops) for (key, offset), (values, ops) in by_offset.items()
        if len(values) > 1)
    return len(found), [
        {"key": key, "offset": offset, "values": [decode_value(v) for v in sorted(values)],
         "ops": sorted(ops)[:MAX_OPS]}
        for key, offset, values, ops in found[:MAX_EXAMPLES]]


def _duplicates(sends, reads):
    by_value = defaultdict(lambda: (set(), set()))
    for key, offset, value, index in _observations(sends, reads):
        offsets, ops = by_value[(key, value)]
        offsets.add(offset)
        ops.add(index)
    found = sorted(
        (key, value, offsets, ops) for (key, value), (offsets, ops) in by_value.items()
        if len(offsets) > 1)
    return len(found), [
        {"key": key, "value": decode_value(value), "offsets": sorted(offsets),
         "ops": sorted(ops)[:MAX_OPS]}
        for key, value, offsets, ops in found[:MAX_EXAMPLES]]


def _aborted_reads(sends, reads):
    failed = {(s[0], s[1]): s[6] for s in sends if s[3] == "fail"}
    hits = defaultdict(lambda: (set(), set()))
    for key, offset, value, _p, index, *_ in reads:
        if (key, value) in failed:
            offsets, ops = hits[(key, value)]
            offsets.add(offset)
            ops.add(index)
    found = sorted(hits.items())
    return len(found), [
        {"key": key, "value": decode_value(value), "offsets": sorted(offsets),
         "ops": [failed[(key, value)]] + sorted(ops)[:MAX_OPS - 1]}
        for (key, value), (offsets, ops) in found[:MAX_EXAMPLES]]


def _lost_and_unseen(sends, reads, ended: set[int], limit: int | None = MAX_EXAMPLES):
    read_values = {(r[0], r[2]) for r in reads}
    max_read: dict[int, tuple[int, int]] = {}  # key -> (max offset, first poll index reading it)
    for key, offset, _v, _p, index, *_ in reads:
        best = max_read.get(key)
        if best is None or offset > best[0] or (offset == best[0] and index < best[1]):
            max_read[key] = (offset, index)
    lost, unseen, undecided = [], [], []
    for key, value, offset, kind, _p, _inv, done in sends:
        if kind != "ok" or offset is None or (key, value) in read_values:
            continue
        bound = max_read.get(key)
        if bound is not None and offset <= bound[0]:
            lost.append((key, offset, value, bound, done))
        elif key in ended:
            unseen.append((key, offset, value, bound, done))
        else:
            undecided.append((key, offset, value))
    lost.sort()
    unseen.sort(key=lambda row: row[:3])
    return {
        "lost-write": (len(lost), [
            {"key": k, "value": decode_value(v), "offset": o, "max_read_offset": b[0],
             "ops": [done, b[1]]}
            for k, o, v, b, done in lost[:limit]]),
        "unseen": (len(unseen), [
            {"key": k, "value": decode_value(v), "offset": o,
             "max_read_offset": b[0] if b else None, "ops": [done]}
            for k, o, v, b, done in unseen[:limit]]),
        "undecided-unseen": (len(undecided),
                             sorted({k for k, _o, _v in sorted(undecided)[:MAX_EXAMPLES]})),
    }


def _read_then_lost(sends, reads, end_of: dict[int, int] | None = None, limit: int | None = MAX_EXAMPLES):
    """Acknowledged, read by some poll, missing from final reads that reach its offset or
    end at or below it (`end_of`: key -> end offset, the keys whose final reads completed)."""
    end_of = end_of or {}
    first_read: dict[tuple, int] = {}  # (key, value) -> first poll index that read it
    final_values = set()
    final_top: dict[int, int] = {}  # key -> highest offset read in the final phase
    for key, offset, value, _p, index, _pos, _s, _inv, final in reads:
        if index < first_read.get((key, value), index + 1):
            first_read[(key, value)] = index
        if final:
            final_values.add((key, value))
            final_top[key] = max(offset, final_top.get(key, offset))
    found = sorted(
        (key, offset, value, done, first_read[(key, value)], final_top.get(key))
        for key, value, offset, kind, _p, _inv, done in sends
        if kind == "ok" and offset is not None and (key, value) in first_read
        and (key, value) not in final_values
        and (final_top.get(key, -1) >= offset or (key in end_of and offset >= end_of[key])))
    return len(found), [
        {"key": k, "value": decode_value(v), "offset": o, "max_final_offset": top,
         "ops": [done, read]}
        for k, o, v, done, read, top in found[:limit]]


def _known_ranks(sends, reads) -> dict[int, dict[int, int]]:
    offsets = defaultdict(set)
    for key, offset, _v, _i in _observations(sends, reads):
        offsets[key].add(offset)
    return {key: {o: rank for rank, o in enumerate(sorted(os))} for key, os in offsets.items()}


def _poll_order(sends, reads):
    ranks = _known_ranks(sends, reads)
    streams = defaultdict(list)
    for key, offset, _v, process, index, pos, session, *_ in reads:
        streams[(key, session)].append((index, pos, offset, process))
    skips, backwards = [], []
    for (key, session), stream in streams.items():
        stream.sort()
        rank = ranks[key]
        for (i1, _p1, o1, _), (i2, p2, o2, process) in zip(stream, stream[1:]):
            delta = rank[o2] - rank[o1]
            if delta == 1:
                continue
            row = ((key, i2, p2, session),
                   {"key": key, "process": process, "offsets": [o1, o2], "delta": delta,
                    "ops": [i1, i2]})
            (skips if delta > 1 else backwards).append(row)
    skips.sort(key=lambda r: r[0])
    backwards.sort(key=lambda r: r[0])
    return {
        "poll-skip": (len(skips), [r[1] for r in skips[:MAX_EXAMPLES]]),
        "nonmonotonic-poll": (len(backwards), [r[1] for r in backwards[:MAX_EXAMPLES]]),
    }


def placed_sends(sends, reads):
    """(key, process, op index, offset, value) of every send whose offset is known: the
    acknowledged one, or for a send without one (not failed) the lowest offset its value
    was observed at when a poll read it (see nonmonotonic-send above). The op index is
    the completion, or the invocation of a send that never completed."""
    read = {(r[0], r[2]) for r in reads}
    lowest: dict[tuple, int] = {}
    for key, offset, value, _index in _observations(sends, reads):
        if offset < lowest.get((key, value), offset + 1):
            lowest[(key, value)] = offset
    for key, value, offset, kind, process, invoke, done in sends:
        if kind == "ok" and offset is not None:
            yield key, process, done, offset, value
        elif kind != "fail" and (key, value) in read:
            yield key, process, invoke if done is None else done, lowest[(key, value)], value


def _nonmonotonic_sends(sends, reads):
    streams = defaultdict(list)
    for key, process, at, offset, value in placed_sends(sends, reads):
        streams[(key, process)].append((at, offset, value))
    found = []
    for (key, process), stream in streams.items():
        stream.sort()
        for (c1, o1, v1), (c2, o2, v2) in zip(stream, stream[1:]):
            if o2 <= o1 and c2 != c1:
                found.append(((key, c2), {
                    "key": key, "process": process, "offsets": [o1, o2],
                    "values": [decode_value(v1), decode_value(v2)], "ops": [c1, c2]}))
    found.sort(key=lambda r: r[0])
    return len(found), [r[1] for r in found[:MAX_EXAMPLES]]


def _realtime_order(sends):
    """Sweep each key's events in index order, keeping the highest offset acknowledged so far."""
    events = defaultdict(list)
    for key, value, offset, kind, _p, invoke, done in sends:
        if kind == "ok" and offset is not None:
            events[key].append((done, 1, offset, value))    # completion: raises the bar
            events[key].append((invoke, 0, offset, value))  # invocation: must clear it
    found = []
    for key, stream in events.items():
        stream.sort()
        best = None  # (offset, completion index) of the highest acknowledged offset
        for index, is_completion, offset, value in stream:
            if is_completion:
                if best is None or (offset, index) > best:
                    best = (offset, index)
            elif best is not None and best[0] > offset:
                found.append(((key, index, offset), {
                    "key": key, "value": decode_value(value), "offset": offset,
                    "earlier_offset": best[0], "ops": [best[1], index]}))
    found.sort(key=lambda r: r[0])
    return len(found), [r[1] for r in found[:MAX_EXAMPLES]]


def _declare():
    from checkers.checker import Checker

    return Checker("log", "Jepsen's Kafka log anomalies over the history",
                   lambda data: check_flat(data.sends, data.reads, data.ends),
                   spark="checkers.spark.log_anomalies")


CHECKER = _declare()

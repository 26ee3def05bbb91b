"""Replica-log diff: compare every replica's final log per (key, offset).

The history shows what clients saw; the dumps show what the replicas hold.
This checker catches what clients could not see: replicas that disagree
about committed data, holes in committed ranges, and acknowledged writes that
no replica kept. In-process kernel over the flat rows of `history.flatten`;
`checkers.replica_arrays` computes the same counts over column arrays and takes its
examples from this kernel (`findings_flat`): the Spark engine's tasks run it per key
(`checkers.spark.replica_diff`); tests hold the two to identical output.

Per replica r of key k: hw(r), log_start(r), and its records (offset, epoch,
value). A record at offset o is *committed on r* when o < hw(r): r has told
clients (or would tell them) that o is durable. The key's committed range is
[min log_start over its replicas, max hw over its replicas): the leader's HW
is the highest (followers' HW = min(own LEO, leader HW)), and offsets below
every replica's log start were removed by retention or tiering, not lost.

- divergence: at (k, o), the replicas on which o is committed hold two or more
  different (epoch, value) records. Equivalently: two replicas disagree at an
  offset below the minimum of their two HWs. A follower's uncommitted tail
  above its own HW may legitimately differ (it will be truncated) and is not
  reported. Per (key, offset); example lists [node, epoch, value] of the
  committed holders (by node), the history ops that sent those values, and
  `differs_in`: "epoch" when the holders keep the same value in different
  leader epochs, else "value".
  Order key, offset.
- missing-committed: an offset in the key's committed range that no replica
  holds. Counted per offset; examples are maximal ranges
  {key, first_offset, last_offset}, ordered by key, first_offset.
- lost-acknowledged: an ok send (offset o) of key k whose value no replica of
  k holds at any offset, where o >= min log_start of k (earlier data may have
  been removed by retention). Keys without any dumped replica are skipped.
  Per send; order key, offset, value.

- overwritten: at (k, o), a past copy (below) held a value committed (o below
  its own HW) and the final replicas' committed records at o hold another
  value. A restarted node truncates what its new leader lacks, so only the copy
  from before shows a committed record that was later replaced: the replicas
  diverged there (an unclean leader election does this). Per (key, offset);
  example as for divergence, past copies among the holders.

Besides the findings, the result lists what a reader of the logs needs to
show them (the report's diff grid, a scenario's divergence table), so that
no reader compares copies itself: `differences`, every (key, offset) at which
the final copies (replicas and the remote tier) hold different (epoch, value)
records, in key, offset order, at most MAX_DIFFERENCES of them
(`differences_total` counts all), each {key, offset, committed (its
committed copies differ: a divergence), differs_in ("epoch" when the copies
that differ hold one value, else "value"), replicas: [[node, epoch, value,
hw]] by node}. An entry not committed is an uncommitted tail that
truncation will repair; a committed one is counted under divergence.

Past copies (`nodes/<node>/past/<n>.json`, systems that keep them: a stopped
node's replica read from its disk just before it restarted, named
"<node>@past<n>") take part in overwritten only. They are not replicas of the
final state: they are left out of divergence, the committed range,
missing-committed and lost-acknowledged.

With tiered storage the dumps include one named ``remote`` (the finished
remote segments, ``replica.remote_store.remote_dump``): one more copy of the
offsets it holds, committed up to its end. An offset held only remotely is
held; a remote record that differs from a replica's committed one is
divergence.

valid: False on any divergence or overwritten record; with every dump present, also on any
missing-committed or lost-acknowledged; "unknown" when no dump exists, or
when some are missing and only the latter two (which a missing replica could
explain) were found; True otherwise. lost-acknowledged also needs the final
phase: dumps taken before the cluster recovered and every key was read to its
end (`final_reads`, see `history.flatten` ends) may lack what the replicas
would still have fetched, so then a lost-acknowledged finding is "unknown"
with that reason.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Iterable

from history.flatten import decode_value, flatten, flatten_dumps, is_past
from checkers.vocabulary import of_checker

ANOMALIES = of_checker("replica-diff")
NO_FINAL_READS = ("lost-acknowledged is undecided: the final reads did not complete (the run was "
                  "interrupted before the final phase, or its reads timed out)")


def final_reads_complete(sends: list[tuple], ends: list[tuple]) -> bool:
    """Every key with an acknowledged send was read to its end in the final phase."""
    ended = {row[0] for row in ends}
    return all(key in ended for key, _v, offset, kind, *_ in sends
               if kind == "ok" and offset is not None)
MAX_EXAMPLES = 20
MAX_OPS = 10
MAX_DIFFERENCES = 1000


def check(dumps: dict[str, dict], ops: Iterable[dict], missing_nodes: Iterable[str] = ()) -> dict:
    """dumps: node -> Dump response (nodes/<node>/dump.json); ops: the history."""
    flat = flatten(ops)
    sends = flat[0]
    records, replicas = flatten_dumps(dumps)
    return check_flat(records, replicas, sends, complete=not list(missing_nodes),
                      final_reads=final_reads_complete(sends, flat.ends))


def check_flat(records: list[tuple], replicas: list[tuple], sends: list[tuple],
               complete: bool = True, final_reads: bool = True) -> dict:
    findings, has_dumps, (total, listed) = findings_flat(records, replicas, sends)
    result = summarize(findings, has_dumps=has_dumps, complete=complete, final_reads=final_reads)
    return with_differences(result, total, listed)


def findings_flat(records: list[tuple], replicas: list[tuple],
                  sends: list[tuple]) -> tuple[dict, bool, tuple[int, list[dict]]]:
    """-> ({kind: (count, sorted examples)}, whether a final replica was dumped,
    `differences`), before `summarize`: what `checkers.replica_arrays` compares its counts with."""
    committed = _committed_copies(records, replicas)
    findings = {
        "divergence": _divergence(committed, sends),
        "overwritten": _overwritten(committed, sends),
        "missing-committed": _missing_committed(records, replicas),
        "lost-acknowledged": _lost_acknowledged(records, replicas, sends),
    }
    has_dumps = any(not is_past(r[0]) for r in replicas)
    return findings, has_dumps, differences(records, replicas)


def with_differences(result: dict, total: int, listed: list[dict]) -> dict:
    """The result with its `differences` (module docstring); both engines."""
    result["differences"] = listed[:MAX_DIFFERENCES]
    result["differences_total"] = total
    return result


def differences(records: list[tuple], replicas: list[tuple]) -> tuple[int, list[dict]]:
    """(how many, the first MAX_DIFFERENCES entries) of the offsets whose final copies differ."""
    hw = {(node, key): h for node, key, h, _leo, _ls in replicas if not is_past(node)}
    held = defaultdict(list)
    for node, key, offset, epoch, value in records:
        if (node, key) in hw:
            held[(key, offset)].append((node, epoch, value, hw[(node, key)]))
    found = sorted(key_offset for key_offset, copies in held.items()
                   if len({(epoch, value) for _n, epoch, value, _h in copies}) > 1)
    return len(found), [difference(key, offset, held[(key, offset)])
                        for key, offset in found[:MAX_DIFFERENCES]]


def difference(key: int, offset: int, copies: list[tuple]) -> dict:
    """One `differences` entry from the final copies (node, epoch, value text, hw) of an
    offset whose copies differ; the Spark driver collects the same copies and calls this."""
    copies = sorted(copies)
    committed = {(epoch, value) for _n, epoch, value, hw in copies if offset < hw}
    differing = committed if len(committed) > 1 else {(epoch, value) for _n, epoch, value, _h in copies}
    return {"key": key, "offset": offset, "committed": len(committed) > 1,
            "differs_in": "epoch" if one_value(value for _e, value in differing) else "value",
            "replicas": [[node, epoch, decode_value(value), hw] for node, epoch, value, hw in copies]}


def summarize(findings: dict[str, tuple[int, list]], has_dumps: bool, complete: bool,
              final_reads: bool = True) -> dict:
    counts = {name: findings[name][0] for name in ANOMALIES}
    examples = {name: findings[name][1][:MAX_EXAMPLES] for name in ANOMALIES if counts[name]}
    for example in examples.get("divergence", ()):
        example["differs_in"] = _differs_in(example)
    undecided = 0
    if counts["lost-acknowledged"] and not final_reads:  # not an anomaly: undecided
        undecided, counts["lost-acknowledged"] = counts["lost-acknowledged"], 0
        examples.pop("lost-acknowledged")
    if counts["divergence"] or counts["overwritten"]:
        valid = False
    elif not has_dumps:
        valid = "unknown"
    elif counts["missing-committed"] or counts["lost-acknowledged"]:
        valid = False if complete else "unknown"
    else:
        valid = "unknown" if undecided else True
    result = {"valid": valid, "counts": counts, "examples": examples}
    if not complete:
        result["note"] = "some replica dumps are missing"
    if undecided:
        result["unknown"] = {"lost-acknowledged": {"count": undecided, "reason": NO_FINAL_READS}}
    return result


def one_value(values: Iterable) -> bool:
    """Whether copies that diverge hold one value (so they differ in their leader epoch
    alone: a record's CRC does not cover it; a flipped epoch bit, or a re-stamped copy)."""
    return len({json.dumps(value, sort_keys=True, default=str) for value in values}) == 1


def _differs_in(example: dict) -> str:
    """"epoch" when the final holders keep one value, else "value". Both engines' examples
    pass through here, so they say the same."""
    final = [value for node, _epoch, value in example.get("replicas", ()) if not is_past(node)]
    return "epoch" if one_value(final) else "value"


def _committed_copies(records, replicas) -> list[tuple[tuple, list]]:
    """[((key, offset), [(node, epoch, value)])], in order, of every copy holding it below its HW."""
    hw = {(node, key): h for node, key, h, _leo, _ls in replicas}
    committed = defaultdict(list)
    for node, key, offset, epoch, value in records:
        if offset < hw.get((node, key), 0):
            committed[(key, offset)].append((node, epoch, value))
    return sorted((key_offset, sorted(holders)) for key_offset, holders in committed.items())


def _divergence(committed, sends):
    """Offsets whose final committed copies differ (the examples list past copies too)."""
    found = [(key_offset, holders) for key_offset, holders in committed
             if len({(epoch, value) for node, epoch, value in holders if not is_past(node)}) > 1]
    return len(found), _offset_examples(found, sends)


def _overwritten(committed, sends):
    """Offsets where a past copy's committed value is not among the final committed ones."""
    found = []
    for key_offset, holders in committed:
        final = {value for node, _e, value in holders if not is_past(node)}
        if final and any(value not in final for node, _e, value in holders if is_past(node)):
            found.append((key_offset, holders))
    return len(found), _offset_examples(found, sends)


def _offset_examples(found, sends) -> list[dict]:
    """Examples of per-offset findings: every committed holder and the ops that sent their values."""
    writers = defaultdict(list)
    wanted = {(k, v) for (k, _o), holders in found[:MAX_EXAMPLES] for _n, _e, v in holders}
    for key, value, _o, _kind, _p, _inv, done in sends:
        if (key, value) in wanted and done is not None:
            writers[(key, value)].append(done)
    examples = []
    for (key, offset), holders in found[:MAX_EXAMPLES]:
        ops = sorted({i for _n, _e, v in holders for i in writers[(key, v)]})
        examples.append({"key": key, "offset": offset,
                         "replicas": [[n, e, decode_value(v)] for n, e, v in holders],
                         "ops": ops[:MAX_OPS]})
    return examples


def _committed_ranges(replicas) -> dict[int, tuple[int, int]]:
    """key -> (min log_start, max hw) over the final replicas."""
    ranges: dict[int, tuple[int, int]] = {}
    for node, key, hw, _leo, log_start in replicas:
        if is_past(node):
            continue
        low, high = ranges.get(key, (log_start, hw))
        ranges[key] = (min(low, log_start), max(high, hw))
    return ranges


def _missing_committed(records, replicas):
    held = defaultdict(set)
    for node, key, offset, _e, _v in records:
        if not is_past(node):
            held[key].add(offset)
    gaps = []
    for key, (low, high) in sorted(_committed_ranges(replicas).items()):
        expected = low
        for offset in sorted(o for o in held[key] if low <= o < high) + [high]:
            if offset > expected:
                gaps.append((key, expected, offset - 1))
            expected = offset + 1
    count = sum(last - first + 1 for _k, first, last in gaps)
    return count, [{"key": k, "first_offset": first, "last_offset": last, "ops": []}
                   for k, first, last in gaps[:MAX_EXAMPLES]]


def _lost_acknowledged(records, replicas, sends):
    held = {(key, value) for node, key, _o, _e, value in records if not is_past(node)}
    ranges = _committed_ranges(replicas)
    lost = sorted(
        (key, offset, value, done) for key, value, offset, kind, _p, _inv, done in sends
        if kind == "ok" and offset is not None and key in ranges
        and offset >= ranges[key][0] and (key, value) not in held)
    return len(lost), [{"key": k, "value": decode_value(v), "offset": o, "ops": [done]}
                       for k, o, v, done in lost[:MAX_EXAMPLES]]


def _declare():
    from checkers.checker import Checker

    return Checker("replica-diff", "the replicas' logs (dumps) against each other and the acknowledged sends",
                   lambda data: check_flat(data.records, data.replicas, data.sends, complete=data.dumps_complete,
                                           final_reads=final_reads_complete(data.sends, data.ends)),
                   needs=("dump",),
                   spark="checkers.spark.replica_diff")


CHECKER = _declare()

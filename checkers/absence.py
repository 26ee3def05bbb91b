"""Keys whose log was gone after recovery: every acknowledged send to them is lost.

The final phase (workloads/log.py) settles a key as gone when, with the
cluster healthy, the system answers definitively that the key's log does not
exist (harness.sut.AbsentError: NATS "stream not found", Kafka's and the
replica's UNKNOWN_TOPIC_OR_PARTITION), on every probe for a while. Its final
poll is recorded `ok` with no records and `"absent": {key: the answer}`.

Both engines' log kernels see that poll as a final read that found an empty
log: an acknowledged send to the key never read is `unseen`, one read earlier
is no anomaly at all (nothing in the final reads reaches its offset), one
below an offset read earlier is already `lost-write`. A log that does not
exist holds none of them, so this pass, run after either engine on the
checker results (checkers.check_store.assemble), counts every acknowledged send to
such a key as `lost-write`: the `unseen` ones move, the read ones are added,
each example names the acknowledgement and the poll that found the log gone
(`absent`: the system's answer). The log checker's result gets `absent`
(key -> answer) for the reports.

Cost: one byte search of the history for the marker; a pass over the history
only when some key was gone.
"""
from __future__ import annotations

import mmap
import os

from history.flatten import decode_value, flatten
from history.formats import iter_jsonl
from checkers.log_anomalies import MAX_EXAMPLES

MARKER = b'"absent":'


def absent_keys(history: str) -> dict[int, tuple[str, int]]:
    """key -> (the system's answer, index of the final poll that got it)."""
    if not os.path.exists(history) or os.path.getsize(history) == 0:
        return {}
    with open(history, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m.find(MARKER) < 0:
            return {}
    out: dict[int, tuple[str, int]] = {}
    for op in iter_jsonl(history):
        marks = op.get("absent")
        if isinstance(marks, dict) and op.get("f") == "poll" and op.get("type") == "ok":
            for key, why in marks.items():
                out[int(key)] = (str(why), op["index"])
    return out


def apply(checkers: dict, store_dir: str | None) -> None:
    """Rewrite the log checker's result in place for keys found gone (see above)."""
    log = checkers.get("log")
    if store_dir is None or not isinstance(log, dict) or "counts" not in log:
        return
    gone = absent_keys(os.path.join(store_dir, "history.jsonl"))
    if not gone:
        return
    sends, reads, _stats = flatten(iter_jsonl(os.path.join(store_dir, "history.jsonl")))
    read_values = {(k, v) for k, _o, v, *_ in reads if k in gone}
    max_read: dict[int, int] = {}
    for key, offset, *_ in reads:
        if key in gone:
            max_read[key] = max(offset, max_read.get(key, offset))
    moved, added, new = 0, 0, []
    for key, value, offset, kind, _p, _inv, done in sends:
        if key not in gone or kind != "ok" or offset is None:
            continue
        bound = max_read.get(key)
        if (key, value) in read_values:
            added += 1           # read earlier, gone now: no anomaly in the kernels
        elif bound is not None and offset <= bound:
            continue             # already lost-write
        else:
            moved += 1           # unseen in the kernels
        why, poll = gone[key]
        new.append((key, offset, value, done, poll, why))
    counts = log["counts"]
    counts["unseen"] = counts.get("unseen", 0) - moved
    counts["lost-write"] = counts.get("lost-write", 0) + moved + added
    examples = log.setdefault("examples", {})
    unseen = [e for e in examples.get("unseen", []) if int(e.get("key", -1)) not in gone]
    if unseen:
        examples["unseen"] = unseen
    else:
        examples.pop("unseen", None)
    lost = list(examples.get("lost-write", []))
    lost += [{"key": k, "value": decode_value(v), "offset": o, "max_read_offset": max_read.get(k),
              "absent": why, "ops": [done, poll]} for k, o, v, done, poll, why in sorted(new)[:MAX_EXAMPLES]]
    lost.sort(key=lambda e: (e["key"], e["offset"], str(e["value"])))
    if lost:
        examples["lost-write"] = lost[:MAX_EXAMPLES]
    log["absent"] = {str(k): why for k, (why, _i) in sorted(gone.items())}
    log["lost_with_absent_logs"] = moved + added
    if counts["lost-write"]:
        log["valid"] = False

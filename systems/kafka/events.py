"""Truncations and ISR changes from a Kafka broker's log (kafka.log), as the
harness.sut.Inspector.events dicts the reports and scenario checks read.

The lines (Kafka 4.x, kafka.cluster.Partition and UnifiedLog/ReplicaFetcher):
  [Partition log-0 broker=1] Shrinking ISR from 1,2,3 to 1,2. Leader: (highWatermark: 10, endOffset: 12).
      Out of sync replicas: (brokerId: 3, endOffset: 8, lastCaughtUpTimeMs: ...).
  [Partition log-0 broker=1] Expanding ISR from 1,2 to 1,2,3
  [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Truncating partition log-0 with
      TruncationState(offset=5, completed=true) due to ...
  [UnifiedLog partition=log-0, dir=...] Truncating to offset 5   (also: "Truncating to 5 has no effect ...")
Each line starts with the log4j2 ISO-8601 time `[2026-11-26T19:53:36,114]`.
"""
from __future__ import annotations

import re
from pathlib import Path

TOPIC = "log"
_TIME = r"^\[(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[,.]\d+)\]"
_SHRINK = re.compile(_TIME + r".*\[Partition " + TOPIC + r"-(\d+) broker=(\d+)\] Shrinking ISR from ([\d,]*) to ([\d,]*)"
                     r"(?:\. Leader: \(highWatermark: (\d+), endOffset: (\d+)\))?")
_EXPAND = re.compile(_TIME + r".*\[Partition " + TOPIC + r"-(\d+) broker=(\d+)\] Expanding ISR from ([\d,]*) to ([\d,]*)")
_FETCHER_TRUNC = re.compile(_TIME + r".*Truncating partition " + TOPIC + r"-(\d+) with TruncationState\(offset=(\d+)"
                            r".*?\) due to (.*)$")
_LOG_TRUNC = re.compile(_TIME + r".*\[UnifiedLog partition=" + TOPIC + r"-(\d+), dir=[^\]]*\] Truncating to "
                        r"(?:offset )?(\d+)(?: has no effect as the largest offset in the log is (\d+))?")


def _time(text: str) -> str:
    return text.replace(" ", "T").replace(",", ".")


def _nodes(text: str) -> list[str]:
    return [f"n{x}" for x in text.split(",") if x]


def log_events(path: Path, node: str) -> list[dict]:
    """Events of one broker's log, in file order."""
    if not path.is_file():
        return []
    out: list[dict] = []
    for line in path.read_text(errors="replace").splitlines():
        if "ISR from" in line:
            m = _SHRINK.match(line)
            if m:
                old, new = _nodes(m.group(4)), _nodes(m.group(5))
                ev = {"time": _time(m.group(1)), "node": node, "key": int(m.group(2)), "event": "isr-shrink",
                      "isr": new, "out": [n for n in old if n not in new]}
                if m.group(6) is not None:
                    ev.update(hw=int(m.group(6)), leo=int(m.group(7)))
                out.append(ev)
                continue
            m = _EXPAND.match(line)
            if m:
                old, new = _nodes(m.group(4)), _nodes(m.group(5))
                added = [n for n in new if n not in old]
                out.append({"time": _time(m.group(1)), "node": node, "key": int(m.group(2)),
                            "event": "isr-expand", "isr": new, "replica": added[0] if added else None,
                            "leo": None, "hw": None})
            continue
        if "Truncating" not in line:
            continue
        m = _FETCHER_TRUNC.match(line)
        if m:
            out.append({"time": _time(m.group(1)), "node": node, "key": int(m.group(2)), "event": "truncate",
                        "from": None, "to": int(m.group(3)), "reason": m.group(4).strip()})
            continue
        m = _LOG_TRUNC.match(line)
        if m and m.group(4) is None:   # "has no effect" lines remove nothing
            out.append({"time": _time(m.group(1)), "node": node, "key": int(m.group(2)), "event": "truncate",
                        "from": None, "to": int(m.group(3))})
    return _one_per_truncation(out)


def _one_per_truncation(events: list[dict]) -> list[dict]:
    """A fetcher's truncation is logged twice (the fetcher's reason, then the
    log's own line): keep the first of two equal truncations in a row."""
    out: list[dict] = []
    for ev in events:
        prev = out[-1] if out else None
        if (ev["event"] == "truncate" and prev is not None and prev["event"] == "truncate"
                and prev["key"] == ev["key"] and prev["to"] == ev["to"]):
            continue
        out.append(ev)
    return out

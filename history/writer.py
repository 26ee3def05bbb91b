"""History writer: one op per line, appended and flushed as it happens, so a
crash of the harness loses nothing already observed (docs/interfaces.md)."""
from __future__ import annotations

import json
import threading
import time
from typing import Any


FINAL_READS = "final-reads"   # nemesis op: how far the final phase read each key back
SCENARIO = "scenario"         # the process of a scenario's steps, bindings and measurements (harness.steps)
HARNESS_PROCESSES = ("nemesis", SCENARIO)  # not clients: not in the op counts


class HistoryWriter:
    """Appends ops to history.jsonl. Thread-safe; indexes are dense from 0."""

    def __init__(self, path: str, t0_ns: int | None = None):
        self.path = path
        self._f = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._index = 0
        self.t0 = time.monotonic_ns() if t0_ns is None else t0_ns
        self.t0_wall = time.time() - (time.monotonic_ns() - self.t0) / 1e9  # the wall clock at time 0
        self.counts = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}

    def now(self) -> int:
        return time.monotonic_ns() - self.t0

    def append(self, process: int | str, type_: str, f: str, value: Any, **extra) -> dict:
        with self._lock:
            op = {"index": self._index, "time": self.now(), "process": process,
                  "type": type_, "f": f, "value": value, **extra}
            self._f.write(json.dumps(op, separators=(",", ":")) + "\n")
            self._f.flush()
            self._index += 1
            if process not in HARNESS_PROCESSES:
                self.counts[type_] += 1
            return op

    def invoke(self, process: int, f: str, value: Any) -> dict:
        return self.append(process, "invoke", f, value)

    def complete(self, invocation: dict, type_: str, value: Any, error: str | None = None, **more) -> dict:
        """The completion of an invocation; `error` says why it failed, if it did; `more`:
        fields of the system's own (a transaction's `producer`), left out when None."""
        assert type_ in ("ok", "fail", "info"), type_
        extra = {"error": error} if error else {}
        extra.update((k, v) for k, v in more.items() if v is not None)
        return self.append(invocation["process"], type_, invocation["f"], value, **extra)

    def nemesis(self, f: str, value: Any, **extra) -> dict:
        """A fault (or heal) as an op of process "nemesis", recorded once applied;
        extra fields (the targeted schedule's `why`) go into the op."""
        return self.append("nemesis", "info", f, value, **extra)

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.close()

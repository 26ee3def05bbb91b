"""A realistic synthetic history.jsonl for benchmarks that start from the history.

Why: `bench.engines.synthetic` writes Parquet tables directly, which skips the
conversion; timing convert + check end to end needs the file itself, in the
harness's own line format (`history.writer.HistoryWriter`), shaped like what
`workloads/log.py` records:

- `concurrency` client slots, each with one op in flight at a time, picked at
  random, so invocations and completions of different processes interleave;
- a send invokes [key, value] (values unique) and completes ok with
  [key, [offset, value]] (the key's next offset, taken at completion), fail
  (1.5%) or info (1.5%), both with an error text; after an info the slot
  continues as a new process (Jepsen's rule) that resumes from the old one's
  positions, as a consumer of a group resumes from its committed offsets
  (starting over from 0 on 1000 keys, every poll would re-read 200 records
  per key, and the reads would be 15x the ops; this way each record is read
  by each of the `concurrency` consumers about once, as in a real run);
- a poll of one or two random keys (sorted) reads up to 200 records per key
  from the process's position and completes ok with {"key": [[offset, value],
  ...]}, or fail (1%) with null;
- a nemesis kill or start op every ~500 lines;
- then the nemesis "final" op, and per key a final process polls it from 0,
  1000 records at a time, until an empty poll at its end.

`ops` counts history lines (every invocation and completion is one, as
results.json's stats.ops counts them); the file holds about that many (the
final phase is sized from the logs, so it can end a few lines over).

Injected anomalies (`inject=n`, each on its own key, at offset 1):
lost-write on keys 0..n-1 (no read returns the offset; consumers skip a
known offset, so it is also a poll-skip) and read-then-lost on keys n..2n-1
(main-phase reads return it, the final reads skip it: also a poll-skip).
"""

from __future__ import annotations

import random
import time

import orjson

POLL_MAX = 200
FINAL_POLL_MAX = 1000
NEMESIS_EVERY = 500
AT = 1  # the offset an injected anomaly is at


def generate_jsonl(path: str, ops: int, keys: int = 1000, inject: int = 0, seed: int = 0,
                   concurrency: int = 10) -> dict:
    """Write a history of about `ops` lines to path; -> what was written (counts, seconds)."""
    if inject and keys < 2 * inject:
        raise ValueError(f"keys must be at least {2 * inject} to inject {inject} of each anomaly")
    started = time.perf_counter()
    rng = random.Random(seed)
    lost = set(range(inject))
    then_lost = set(range(inject, 2 * inject))
    logs: list[list[int]] = [[] for _ in range(keys)]
    counts = {"sends": 0, "ok_sends": 0, "polls": 0, "reads": 0}
    with open(path, "wb") as out:
        writer = _Writer(out, rng)
        final_lines = 2 * keys  # lines the final phase needs for the logs so far
        processes = list(range(concurrency))
        in_flight: list[tuple | None] = [None] * concurrency
        positions: list[dict[int, int]] = [{} for _ in range(concurrency)]
        next_process, value = concurrency, 0
        rnd = rng.random  # random() and int(): randrange and sample took half the time
        while writer.index + final_lines + concurrency + 1 < ops:
            if writer.index % NEMESIS_EVERY == NEMESIS_EVERY - 1:
                writer.op("nemesis", "info", rng.choice(("kill", "start")), ["n1", "n3"])
                continue
            slot = int(rnd() * concurrency)
            process, pending = processes[slot], in_flight[slot]
            if pending is None:
                if rnd() < 0.5:
                    value += 1
                    key = int(rnd() * keys)
                    writer.op(process, "invoke", "send", [key, value])
                    in_flight[slot] = ("send", key, value)
                else:
                    writer.op(process, "invoke", "poll", None)
                    in_flight[slot] = ("poll",)
                continue
            in_flight[slot] = None
            if pending[0] == "send":
                counts["sends"] += 1
                _, key, sent = pending
                roll = rnd()
                if roll < 0.015:
                    writer.op(process, "fail", "send", [key, sent], error="NOT_ENOUGH_REPLICAS")
                elif roll < 0.03:
                    writer.op(process, "info", "send", [key, sent], error="TimeoutError")
                    processes[slot] = next_process
                    next_process += 1
                else:
                    log = logs[key]
                    writer.op(process, "ok", "send", [key, [len(log), sent]])
                    log.append(sent)
                    counts["ok_sends"] += 1
                    if len(log) % FINAL_POLL_MAX == 1:
                        final_lines += 2
                continue
            counts["polls"] += 1
            if rnd() < 0.01:
                writer.op(process, "fail", "poll", None, error="NOT_LEADER_OR_FOLLOWER")
                continue
            read, seen = {}, positions[slot]
            first, second = int(rnd() * keys), int(rnd() * keys)
            for key in (first,) if rnd() < 0.5 or first == second else sorted((first, second)):
                start, log = seen.get(key, 0), logs[key]
                stop = min(len(log), start + POLL_MAX)
                pairs = [[o, log[o]] for o in range(start, stop) if not (key in lost and o == AT)]
                read[str(key)] = pairs
                counts["reads"] += len(pairs)
                seen[key] = stop
            writer.op(process, "ok", "poll", read)
        for slot, pending in enumerate(in_flight):  # what is still in flight completes
            if pending is not None and pending[0] == "send":
                writer.op(processes[slot], "info", "send", [pending[1], pending[2]], error="cancelled")
            elif pending is not None:
                writer.op(processes[slot], "fail", "poll", None, error="cancelled")
        writer.op("nemesis", "info", "final", {"healed": True, "restarted": []})
        for key, log in enumerate(logs):
            process, start = next_process + key, 0
            while True:
                writer.op(process, "invoke", "poll", None)
                stop = min(len(log), start + FINAL_POLL_MAX)
                pairs = [[o, log[o]] for o in range(start, stop)
                         if not (o == AT and (key in lost or key in then_lost))]
                writer.op(process, "ok", "poll", {str(key): pairs})
                counts["reads"] += len(pairs)
                if start == stop:
                    break
                start = stop
    injected = {"lost-write": [[k, AT] for k in sorted(lost) if len(logs[k]) > AT + 1],
                "read-then-lost": [[k, AT] for k in sorted(then_lost) if len(logs[k]) > AT + 1]}
    return {"path": path, "ops": writer.index, "keys": keys, "seed": seed, **counts,
            "injected": injected, "bytes": writer.bytes,
            "seconds": round(time.perf_counter() - started, 3)}


class _Writer:
    """Numbered, timed ops as compact JSON lines, in the HistoryWriter's field order."""

    def __init__(self, out, rng: random.Random) -> None:
        self.out, self.rnd = out, rng.random
        self.index, self.time, self.bytes = 0, 0, 0
        self.dumps = orjson.dumps

    def op(self, process, type_: str, f: str, value, error: str | None = None) -> None:
        self.time += 20_000 + int(self.rnd() * 1_980_000)
        op = {"index": self.index, "time": self.time, "process": process, "type": type_, "f": f,
              "value": value}
        if error:
            op["error"] = error
        line = self.dumps(op) + b"\n"
        self.out.write(line)
        self.bytes += len(line)
        self.index += 1

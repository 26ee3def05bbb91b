"""A synthetic Kafka-style history.jsonl in the harness's format, and a timed conversion.

Why: the streaming JSONL -> Parquet path (`checkers.check_store.check_campaign`,
engine spark) must stay fast and memory-flat on 10M-op histories; this writes
a realistic file to measure it on, and the tests use small ones.

Op j is an invocation and a completion (two lines). About 55% of ops are
sends by producers 0..7 to a random key of KEYS (1% fail, 1% indefinite); an
ok send to key k gets k's next offset. The rest are polls by consumers
8..15 of one to three keys, each reading what was written to that key since
the consumer's last poll of it. Then a nemesis "final" op and per key two
final polls by process 16: one re-reads the key from offset 0, the next
comes back empty at its end (these count as ops too, so the file holds `ops`
ops in all).

Usage:
    python -m tests.checkers.synthetic_jsonl OUT.jsonl OPS           # write
    python -m tests.checkers.synthetic_jsonl OUT.jsonl OPS --convert  # write, then time -> Parquet
"""

from __future__ import annotations

import argparse
import random
import resource
import time

import orjson

KEYS = 1000
PRODUCERS = range(0, 8)
CONSUMERS = range(8, 16)
FINAL_CONSUMER = 16


def write_history(path: str, ops: int, keys: int = KEYS, seed: int = 1) -> int:
    """Write `ops` ops (2 lines each, the nemesis op 1) to path; -> number of lines."""
    rng = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(keys)]       # key -> values by offset
    seen: dict[tuple[int, int], int] = {}                    # (consumer, key) -> next offset
    index = 0
    value = 0
    main_ops = max(0, ops - 1 - 2 * keys)

    with open(path, "wb") as out:
        def emit(process, kind, f, val, **extra) -> None:
            nonlocal index
            op = {"index": index, "time": index * 1000, "process": process,
                  "type": kind, "f": f, "value": val, **extra}
            out.write(orjson.dumps(op, option=orjson.OPT_NON_STR_KEYS) + b"\n")
            index += 1

        for _ in range(main_ops):
            if rng.random() < 0.55:
                process, key = rng.choice(PRODUCERS), rng.randrange(keys)
                value += 1
                emit(process, "invoke", "send", [key, value])
                roll = rng.random()
                if roll < 0.01:
                    emit(process, "fail", "send", [key, value], error="NOT_ENOUGH_REPLICAS")
                elif roll < 0.02:
                    emit(process, "info", "send", [key, value], error="REQUEST_TIMED_OUT")
                else:
                    logs[key].append(value)
                    emit(process, "ok", "send", [key, [len(logs[key]) - 1, value]])
            else:
                process = rng.choice(CONSUMERS)
                emit(process, "invoke", "poll", None)
                read = {}
                for key in rng.sample(range(keys), rng.randint(1, 3)):
                    start = seen.get((process, key), 0)
                    read[key] = [[o, logs[key][o]] for o in range(start, len(logs[key]))]
                    seen[(process, key)] = len(logs[key])
                emit(process, "ok", "poll", read)
        emit("nemesis", "info", "final", {"healed": True, "restarted": []})
        for key in range(min(keys, (ops - 1) // 2)):
            emit(FINAL_CONSUMER, "invoke", "poll", None)
            emit(FINAL_CONSUMER, "ok", "poll", {key: [[o, v] for o, v in enumerate(logs[key])]})
            emit(FINAL_CONSUMER, "invoke", "poll", None)
            emit(FINAL_CONSUMER, "ok", "poll", {key: []})  # the end of the key
    return index


def convert(path: str, out_dir: str) -> dict:
    """Time history.jsonl -> Parquet the way check_campaign does it."""
    from history.formats import iter_jsonl
    from history.parquet import write_run

    started = time.perf_counter()
    reader = iter_jsonl(path)
    stats = write_run(out_dir, "bench", reader, {})
    seconds = time.perf_counter() - started
    return {"stats": stats, "seconds": round(seconds, 2),
            "ops_per_s": round(stats["ops"] / seconds),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path")
    parser.add_argument("ops", type=int)
    parser.add_argument("--convert", metavar="OUT_DIR", help="then time the Parquet conversion")
    args = parser.parse_args()
    started = time.perf_counter()
    lines = write_history(args.path, args.ops)
    print(f"wrote {lines} lines in {time.perf_counter() - started:.1f}s")
    if args.convert:
        print(convert(args.path, args.convert))


if __name__ == "__main__":
    main()

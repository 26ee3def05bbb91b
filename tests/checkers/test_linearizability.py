"""The linearizability checker of every store check agrees with the log checker.

Both directions, on every history the checker tests build (hand-made cases,
the synthetic history.jsonl, the bench generator's runs): a history with a
lost, unseen, read-then-lost or divergent (inconsistent-offsets) acknowledged
write is not linearizable, and one the log checker passes is. In between, the
log checker's consumer-side anomalies (nonmonotonic-poll: a consumer reads an
offset again) say nothing about the log object and may be linearizable.
Every results.json the rest of the suite writes is held to the same rule by
tests/conftest.py, through tests/checkers/verdict_rule.py.
"""
from __future__ import annotations

import pytest

from checkers import linearizability, log_anomalies
from bench.engines import synthetic
from history.flatten import flatten
from history.formats import read_history
from tests.checkers import log_histories
from tests.checkers.synthetic_jsonl import write_history
from tests.checkers.verdict_rule import agree

pytestmark = pytest.mark.unit

def both(ops: list[dict]) -> tuple[dict, dict]:
    flat = flatten(ops)
    sends, reads, _stats = flat
    return (log_anomalies.check_flat(sends, reads, flat.ends),
            linearizability.check_flat(sends, reads, flat.ends))


HAND_MADE = {"clean": log_histories.clean, "interrupted": log_histories.interrupted,
             **log_histories.ANOMALOUS,
             **{name: make for name, (make, _) in log_histories.CONSUMER.items()}}


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_hand_made_histories_agree(name):
    log, linear = both(HAND_MADE[name]().ops)
    agree(log, linear)


def test_each_lost_or_divergent_case_is_found_on_its_key():
    for name in ("lost-write", "unseen", "read-then-lost", "inconsistent-offsets"):
        _log, linear = both(log_histories.ANOMALOUS[name]().ops)
        example = linear["counterexamples"][0]
        assert linear["valid"] is False and example["op"]["index"] is not None
        assert {"key", "op", "linearized", "concurrent", "state"} <= set(example)


def test_synthetic_jsonl_history_agrees(tmp_path):
    path = tmp_path / "history.jsonl"
    write_history(str(path), 3000, keys=15)
    log, linear = both(read_history(path))
    assert log["valid"] is True
    agree(log, linear)


@pytest.mark.parametrize("inject", [0, 1])
def test_bench_generator_runs_agree(tmp_path, inject):
    synthetic.generate(str(tmp_path / "run"), ops=6000, keys=14, inject=inject, seed=3,
                   chunk_ops=2000)
    sends, reads, _records, _replicas, ends = synthetic.load_flat(str(tmp_path / "run"))
    log = log_anomalies.check_flat(sends, reads, ends)
    linear = linearizability.check_flat(sends, reads, ends)
    assert log["valid"] is (inject == 0)
    agree(log, linear)


def overlapped(ops: list[dict]) -> list[dict]:
    """The same calls, each completion moved past the next invocation of another process:
    every call overlaps its neighbour, so no key is in plain real-time order (the search runs)."""
    out, held = [], None
    for op in ops:
        if op["type"] == "invoke" and held is not None and held["process"] != op["process"]:
            out += [op, held]
            held = None
            continue
        if held is not None:
            out.append(held)
            held = None
        if op["type"] != "invoke" and isinstance(op["process"], int):
            held = op
        else:
            out.append(op)
    out += [held] if held is not None else []
    return [{**op, "index": i} for i, op in enumerate(out)]


def test_the_time_limit_stops_the_search_and_says_unknown(tmp_path):
    path = tmp_path / "history.jsonl"
    write_history(str(path), 9000, keys=3)  # three keys: thousands of search steps each
    flat = flatten(overlapped(read_history(path)))
    linear = linearizability.check_flat(flat[0], flat[1], flat.ends, time_limit=0.0)
    assert linear["valid"] == "unknown"
    assert linear["unknown_keys"] == [0, 1, 2] and linear["reason"] == ["time-limit (0 s)"]
    assert linearizability.check_flat(flat[0], flat[1], flat.ends)["valid"] is True

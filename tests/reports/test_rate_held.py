"""The report's rate figure (reports/rate.py): the configured rate beside what the clients
invoked outside fault windows, on synthetic histories whose rate is known."""

from __future__ import annotations

import json
import random

import pytest

from reports.ops import fault_intervals, fault_table, pair_ops
from reports.rate import HELD_FRACTION, rate_held
from reports.report import build_report

pytestmark = pytest.mark.unit

S = 1_000_000_000  # ns


def history(invokes: list[int], nemesis: list[tuple[int, str]], latency: int = 5_000_000) -> list[dict]:
    """Client sends invoked at the given times (ns), each ok after `latency`, one process
    per op in turn of 10, and nemesis ops (time, f); in time order, indexed."""
    lines = []
    for n, t in enumerate(invokes):
        p = n % 10
        lines.append({"time": t, "process": p, "type": "invoke", "f": "send", "value": [0, n]})
        lines.append({"time": t + latency, "process": p, "type": "ok", "f": "send", "value": [0, [n, n]]})
    for t, f in nemesis:
        lines.append({"time": t, "process": "nemesis", "type": "info", "f": f, "value": ["n1"]})
    lines.sort(key=lambda line: line["time"])
    return [{"index": i, **line} for i, line in enumerate(lines)]


def poisson(rate: float, start: float, end: float, rng: random.Random) -> list[int]:
    out, t = [], start
    while (t := t + rng.expovariate(rate)) < end:
        out.append(int(t * S))
    return out


def figure(lines: list[dict], rate: float = 100.0):
    ops = pair_ops(lines)
    faults, _ = fault_intervals(ops, max(op.end for op in ops), fault_table({}))
    return rate_held(ops, faults, {"rate": rate})


def test_a_closed_loop_below_the_rate_is_not_held():
    # 10 clients each waiting 0.1 s after each 0.1 s op: 50 ops/s against 100 configured
    rng = random.Random(1)
    lines = history(poisson(50, 0, 30, rng), [])
    got = figure(lines)
    assert got.held is False
    assert 45 < got.achieved < 55 and got.configured == 100
    assert got.sentence().startswith("rate not held: ")
    assert "of 100 configured outside fault windows" in got.sentence()


def test_the_rate_is_judged_outside_fault_windows():
    # 100 ops/s, nothing invoked while n1 is killed (10 s .. 20 s): over the whole 30 s that
    # would be 67 ops/s; outside the window it is 100
    rng = random.Random(2)
    invokes = poisson(100, 0, 10, rng) + poisson(100, 20, 30, rng)
    got = figure(history(invokes, [(10 * S, "kill"), (20 * S, "start")]))
    assert got.windows == ((10 * S, 20 * S),)
    assert got.held is True and got.achieved > HELD_FRACTION * 100
    assert 19.5 < got.outside_s < 20.01
    assert got.sentence().startswith("rate held: ")


def test_ops_inside_a_window_and_after_the_final_heal_do_not_count():
    rng = random.Random(3)
    main = poisson(60, 0, 20, rng)
    during = poisson(500, 5, 8, rng)                   # a burst inside the partition
    final_reads = poisson(2000, 21, 25, rng)           # the final phase reads fast
    lines = history(sorted(main + during + final_reads),
                    [(5 * S, "partition"), (8 * S, "heal"), (int(20.5 * S), "final")])
    got = figure(lines)
    assert got.phase[1] < 20.5 * S
    assert got.invocations == sum(1 for t in main if not 5 * S <= t <= 8 * S)
    assert got.held is False and 50 < got.achieved < 70


def test_no_figure_without_a_rate_or_without_fault_free_time():
    lines = history(poisson(100, 0, 10, random.Random(4)), [])
    ops = pair_ops(lines)
    assert rate_held(ops, [], {}) is None
    assert rate_held(ops, [], {"rate": "fast"}) is None
    always = history(poisson(100, 0, 10, random.Random(5)), [(0, "pause"), (20 * S, "resume")])
    got = figure(always)
    assert got.achieved is None and got.held is None
    assert got.sentence().startswith("rate: not measurable")


def test_the_report_states_the_figure(tmp_path):
    rng = random.Random(6)
    invokes = poisson(40, 0, 20, rng)
    (tmp_path / "test.json").write_text(json.dumps({"name": "rate", "rate": 100, "concurrency": 10}))
    with open(tmp_path / "history.jsonl", "w") as out:
        for line in history(invokes, [(5 * S, "kill"), (8 * S, "start")]):
            out.write(json.dumps(line) + "\n")
    page = open(build_report(tmp_path), encoding="utf-8").read()
    line = page[page.index('<p id="rate-held"'):]
    line = line[:line.index("</p>")]
    assert "rate not held: " in line and "of 100 configured outside fault windows" in line
    assert 'id="throughput-plot"' in page

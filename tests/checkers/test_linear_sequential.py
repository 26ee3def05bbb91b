"""The real-time-order shortcut of the linearizability check gives exactly the search's result.

A key whose calls are all definite and never overlap is stepped through once
(`checkers.linear.wgl`) instead of searched. Each case below breaks one rule of the
shortcut (or none); the result must equal the plain search's (verdict, counts,
counterexample), the shortcut must be taken exactly where the case says, and the
Spark check must equal the local one.
"""

from __future__ import annotations

import copy


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers import linearizability
from history import parquet
from history.flatten import flatten
from checkers.linear.history_local import split_history
from checkers.linear.models import Log, parse_model
from checkers.linear.wgl import check_calls, search, windows
from checkers.linearizability import flat_keys, key_calls, same_verdicts
from tests.checkers.linear_histories import log_histories, register_histories
from tests.checkers.log_histories import History


def _finish(h: History, reads: dict) -> History:
    """The final phase: a fresh consumer reads `reads`, then an empty poll at each key's end."""
    h.final()
    h.poll(9, reads)
    h.poll(9, {key: [] for key in reads})
    return h


def sequential() -> History:
    """Clean, one call at a time; an indefinite send nobody read, a failed one, a key
    with only a failed send and one with only an indefinite send (no calls)."""
    h = History()
    h.send(0, 0, 100, 0)
    h.send(1, 0, 101, 1)
    h.send(1, 0, 900, kind="info")
    h.send(0, 0, 901, kind="fail")
    h.poll(2, {0: [(0, 100), (1, 101)]})
    h.send(0, 1, 902, kind="fail")
    h.send(1, 2, 903, kind="info")
    return _finish(h, {0: [(0, 100), (1, 101)]})


def concurrent() -> History:
    h = History()
    h.invoke_send(0, 0, 100)
    h.invoke_send(1, 0, 101)
    h.complete_send(0, 0, 100, 0)
    h.complete_send(1, 0, 101, 1)
    return _finish(h, {0: [(0, 100), (1, 101)]})


def concurrent_lost() -> History:
    """Overlapping sends, one acknowledged write missing from the final reads."""
    h = concurrent()
    h.ops = h.ops[:4]
    return _finish(h, {0: [(0, 100)]})


def poll_overlaps_send() -> History:
    h = History()
    h._add(2, "invoke", "poll", None)
    h.send(0, 0, 100, 0)
    h._add(2, "ok", "poll", {"0": [[0, 100]]})
    return _finish(h, {0: [(0, 100)]})


def poll_overlaps_ack(lose: bool = False) -> History:
    """A poll invoked before the send of its second record completes: that record is needed
    (the search must put the send first), unlike the final reads' (left out on Spark)."""
    h = History()
    h.send(0, 0, 100, 0)
    h.invoke_send(1, 0, 101)
    h._add(2, "invoke", "poll", None)
    h.complete_send(1, 0, 101, 1)
    h._add(2, "ok", "poll", {"0": [[0, 100], [1, 101]]})
    return _finish(h, {0: [(0, 100)] if lose else [(0, 100), (1, 101)]})


def read_before_append() -> History:
    """Looks sequential, not linearizable: a poll reads offset 1 before it is sent."""
    h = History()
    h.send(0, 0, 100, 0)
    h.poll(2, {0: [(0, 100), (1, 101)]})
    h.send(0, 0, 101, 1)
    return _finish(h, {0: [(0, 100), (1, 101)]})


def wrong_value() -> History:
    """Looks sequential: a poll reads a value at an offset where another was acknowledged."""
    h = History()
    h.send(0, 0, 100, 0)
    h.poll(2, {0: [(0, 555)]})
    return _finish(h, {0: [(0, 100)]})


def appends_out_of_order() -> History:
    h = History()
    h.send(0, 0, 100, 1)
    h.send(0, 0, 101, 0)
    return _finish(h, {0: [(0, 101), (1, 100)]})


def poll_skips() -> History:
    h = History()
    for offset in range(3):
        h.send(0, 0, 100 + offset, offset)
    h.poll(2, {0: [(0, 100), (2, 102)]})
    return _finish(h, {0: [(0, 100), (1, 101), (2, 102)]})


def poll_repeats_and_skips() -> History:
    """Three records over offsets 0..2 but offset 1 missing (0 read twice): still a skip."""
    h = History()
    for offset in range(3):
        h.send(0, 0, 100 + offset, offset)
    h.poll(2, {0: [(0, 100), (0, 100), (2, 102)]})
    return _finish(h, {0: [(0, 100), (1, 101), (2, 102)]})


def poll_repeats() -> History:
    """A poll with one record twice: legal and in real-time order; Spark's rule (each read
    stream reads consecutive offsets) is stricter and leaves it to the search."""
    h = History()
    h.send(0, 0, 100, 0)
    h.poll(2, {0: [(0, 100), (0, 100)]})
    return _finish(h, {0: [(0, 100)]})


def end_short() -> History:
    """The final consumer stops at 2 of 3 acknowledged offsets."""
    h = History()
    for offset in range(3):
        h.send(0, 0, 100 + offset, offset)
    return _finish(h, {0: [(0, 100), (1, 101)]})


def indefinite_pinned() -> History:
    """An indefinite send of a value also acknowledged: it may land, so it is searched."""
    h = History()
    h.send(0, 0, 100, 0)
    h.send(1, 0, 100, kind="info")
    return _finish(h, {0: [(0, 100)]})


def indefinite_read() -> History:
    """An indefinite send that landed: a poll reads it."""
    h = History()
    h.send(0, 0, 100, 0)
    h.send(1, 0, 101, kind="info")
    h.poll(2, {0: [(0, 100), (1, 101)]})
    return _finish(h, {0: [(0, 100), (1, 101)]})


def indefinite_lost() -> History:
    """Not linearizable although sequential but for an indefinite send: offset 1 is read
    before anything could be there, the indefinite send comes later."""
    h = History()
    h.send(0, 0, 100, 0)
    h.poll(2, {0: [(0, 100), (1, 101)]})
    h.send(1, 0, 101, kind="info")
    return _finish(h, {0: [(0, 100), (1, 101)]})


# name -> (history, valid, keys decided without a search: in Python, on Spark)
CASES = {
    "sequential": (sequential, True, {0, 1, 2}, {0, 1, 2}),
    "concurrent": (concurrent, True, set(), set()),
    "concurrent-lost": (concurrent_lost, False, set(), set()),
    "poll-overlaps-send": (poll_overlaps_send, True, set(), set()),
    "poll-overlaps-ack": (poll_overlaps_ack, True, set(), set()),
    "poll-overlaps-ack-lost": (lambda: poll_overlaps_ack(lose=True), False, set(), set()),
    "read-before-append": (read_before_append, False, set(), set()),
    "wrong-value": (wrong_value, False, set(), set()),
    "appends-out-of-order": (appends_out_of_order, False, set(), set()),
    "poll-skips": (poll_skips, False, set(), set()),
    "poll-repeats-and-skips": (poll_repeats_and_skips, False, set(), set()),
    "poll-repeats": (poll_repeats, True, {0}, set()),
    "end-short": (end_short, False, set(), set()),
    "indefinite-pinned": (indefinite_pinned, True, set(), set()),
    "indefinite-read": (indefinite_read, True, set(), set()),
    "indefinite-lost": (indefinite_lost, False, set(), set()),
}


def _prepared(ops: list[dict]):
    """(key, prepared calls) per key, as the store check builds them from flat rows."""
    flat = flatten(ops)
    return [(key, Log().prepare(key_calls(key, *rows)))
            for key, rows in flat_keys(flat[0], flat[1], flat.ends)]


def _shortcut_keys(ops: list[dict]) -> set:
    """Keys decided without any search: no calls, or one definite call per window, legal."""
    return {key for key, calls in _prepared(ops)
            if all(len(w) == 1 and calls[w[0]].complete_pos is not None for w in windows(calls))
            and check_calls(Log(), calls)["valid"] is True}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_shortcut_equals_the_search(name):
    make, valid, shortcut, _on_spark = CASES[name]
    ops = make().ops
    for key, calls in _prepared(ops):
        assert check_calls(Log(), calls) == search(Log(), calls), key
    assert _shortcut_keys(ops) == shortcut
    flat = flatten(ops)
    assert linearizability.check_flat(flat[0], flat[1], flat.ends)["valid"] is valid


def _agree_on_every_key(ops: list[dict], model: str) -> None:
    spec = parse_model(model)
    for _key, calls in split_history(ops, spec):
        assert check_calls(spec.fresh(), calls) == search(spec.fresh(), calls)


SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.mark.unit
@SETTINGS
@given(st.integers(1, 3).flatmap(lambda p: log_histories(keys=2, processes=p, max_steps=30)),
       st.data())
def test_the_shortcut_equals_the_search_on_simulated_logs(ops, data):
    # one process: every call in real-time order; half the time one record is corrupted
    polls = [i for i, op in enumerate(ops) if op["type"] == "ok" and op["f"] == "poll"
             and any(op["value"].values())]
    if polls and data.draw(st.booleans()):
        ops = copy.deepcopy(ops)
        records = [r for r in ops[data.draw(st.sampled_from(polls))]["value"].values() if r]
        records[0][0][1] = data.draw(st.sampled_from([-1, 100, 101]))
    _agree_on_every_key(ops, "log")


@pytest.mark.unit
@SETTINGS
@given(st.integers(1, 3).flatmap(lambda p: register_histories(cas=True, processes=p,
                                                              max_steps=24)), st.data())
def test_the_shortcut_equals_the_search_on_simulated_registers(ops, data):
    reads = [i for i, op in enumerate(ops) if op["type"] == "ok" and op["f"] == "read"]
    if reads and data.draw(st.booleans()):
        ops = copy.deepcopy(ops)
        ops[data.draw(st.sampled_from(reads))]["value"] = data.draw(st.integers(0, 4))
    _agree_on_every_key(ops, "cas-register:0")


@pytest.fixture(scope="module")
def on_spark(spark, tmp_path_factory):
    """Every case as one run of one Spark check of linearizability (every key searched in
    the engine's key pass)."""
    from checkers.spark.engine import check_runs

    root = tmp_path_factory.mktemp("sequential")
    runs = sorted(CASES)
    for run in runs:
        parquet.write_run(str(root / run), run, CASES[run][0]().ops, {})
    found = check_runs([str(root / run) for run in runs], runs, spark=spark, names={"linearizability"})
    return {run: found[run]["linearizability"] for run in runs}


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(CASES))
def test_spark_equals_local(on_spark, name):
    make, valid, _in_python, _shortcut = CASES[name]
    flat = flatten(make().ops)
    local = linearizability.check_flat(flat[0], flat[1], flat.ends)
    assert (same_verdicts({"linearizability": on_spark[name]})
            == same_verdicts({"linearizability": local}))
    for count in ("keys", "calls", "configs"):
        assert on_spark[name][count] == local[count], count
    assert on_spark[name]["valid"] is valid

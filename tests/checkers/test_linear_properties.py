"""Property tests: simulated linearizable objects pass; one bad read fails.

Also cross-checks the WGL search against an exhaustive search on small
random (possibly non-linearizable) register histories.
"""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from checkers.linear import check_ops
from tests.checkers.linear_histories import (
    brute_force_log,
    brute_force_register,
    log_histories,
    register_histories,
)
import pytest

pytestmark = pytest.mark.unit

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])


@SETTINGS
@given(register_histories(cas=True))
def test_simulated_cas_register_is_linearizable(ops):
    assert check_ops(ops, "cas-register:0")["valid"] is True


@SETTINGS
@given(register_histories(cas=False, processes=4))
def test_simulated_register_is_linearizable(ops):
    assert check_ops(ops, "register:0")["valid"] is True


def _ok_reads(ops):
    return [i for i, op in enumerate(ops) if op["type"] == "ok" and op["f"] == "read"]


@SETTINGS
@given(register_histories(cas=True), st.data())
def test_read_of_a_value_never_written_is_rejected(ops, data):
    reads = _ok_reads(ops)
    assume(reads)
    bad = copy.deepcopy(ops)
    victim = data.draw(st.sampled_from(reads))
    bad[victim]["value"] = 999  # the simulator only writes 0..4
    result = check_ops(bad, "cas-register:0")
    assert result["valid"] is False
    assert result["counterexample"]["op"]["index"] == bad[victim]["index"]


@SETTINGS
@given(register_histories(cas=True, settle=True))
def test_stale_read_after_a_completed_write_is_rejected(ops):
    # Every call has completed (none indefinite), so after a definite write
    # of 7 that follows all of them, a read must return 7; 0 is stale.
    tail = [
        {"process": 1000, "type": "invoke", "f": "write", "value": 7},
        {"process": 1000, "type": "ok", "f": "write", "value": 7},
        {"process": 1001, "type": "invoke", "f": "read", "value": None},
        {"process": 1001, "type": "ok", "f": "read", "value": 0},
    ]
    assert check_ops(ops + tail[:2], "cas-register:0")["valid"] is True
    result = check_ops(ops + tail, "cas-register:0")
    assert result["valid"] is False
    assert result["counterexample"]["op"]["value"] == 0
    assert result["counterexample"]["state"] == 7


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(register_histories(cas=True, max_steps=24), st.data())
def test_wgl_agrees_with_exhaustive_search(ops, data):
    reads = _ok_reads(ops)
    if reads and data.draw(st.booleans()):  # half the time, corrupt one read
        ops = copy.deepcopy(ops)
        ops[data.draw(st.sampled_from(reads))]["value"] = data.draw(st.integers(0, 4))
    assert check_ops(ops, "cas-register:0")["valid"] is brute_force_register(ops, initial=0)


@SETTINGS
@given(log_histories())
def test_simulated_log_is_linearizable(ops):
    assert check_ops(ops, "log")["valid"] is True


@SETTINGS
@given(log_histories(), st.data())
def test_poll_of_a_value_never_sent_is_rejected(ops, data):
    polls = [i for i, op in enumerate(ops) if op["type"] == "ok" and op["f"] == "poll"]
    assume(polls)
    i = data.draw(st.sampled_from(polls))
    key = data.draw(st.sampled_from(sorted(ops[i]["value"])))
    bad = copy.deepcopy(ops)
    records = bad[i]["value"][key]
    if records:
        records[data.draw(st.integers(0, len(records) - 1))][1] = -1  # sends carry values >= 100
    else:
        records.append([0, -1])
    result = check_ops(bad, "log")
    assert result["valid"] is False
    assert result["counterexample"]["key"] == int(key)
    # (the op reported may be another one: a crashed send that only this poll
    # saw now has nowhere to land, so a later send can fail first)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(log_histories(keys=1, max_steps=24), st.data())
def test_log_search_agrees_with_exhaustive_search(ops, data):
    # Corrupt one poll record or one acknowledged offset half the time.
    targets = [(i, n) for i, op in enumerate(ops) if op["type"] == "ok" and op["f"] == "poll"
               for n in range(len(op["value"]["0"]))]
    sends = [i for i, op in enumerate(ops) if op["type"] == "ok" and op["f"] == "send"]
    ops = copy.deepcopy(ops)
    choice = data.draw(st.sampled_from(["none", "poll", "send"]))
    if choice == "poll" and targets:
        i, n = data.draw(st.sampled_from(targets))
        ops[i]["value"]["0"][n][1] = data.draw(st.sampled_from([-1, 100, 101, 102, 103]))
    elif choice == "send" and sends:
        i = data.draw(st.sampled_from(sends))
        ops[i]["value"][1][0] += data.draw(st.sampled_from([-1, 1]))
    assert check_ops(ops, "log")["valid"] is brute_force_log(ops)

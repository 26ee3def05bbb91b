"""The models, the verdicts on hand-made histories, limits, and both drivers."""
from __future__ import annotations

import json

import pytest

from history.formats import write_jsonl
from checkers.linear import check_file, check_ops
from checkers.linear.history_local import check_ops as check_local

pytestmark = pytest.mark.unit


class H:
    """Builds a history: ``h.call(p, f, value, result, kind)`` or split invoke/complete."""

    def __init__(self):
        self.ops: list[dict] = []

    def inv(self, p, f, value=None):
        self.ops.append({"index": len(self.ops), "process": p, "type": "invoke", "f": f, "value": value})
        return self

    def end(self, p, f, value=None, kind="ok"):
        self.ops.append({"index": len(self.ops), "process": p, "type": kind, "f": f, "value": value})
        return self

    def call(self, p, f, value=None, result=None, kind="ok"):
        return self.inv(p, f, value).end(p, f, value if result is None else result, kind)


# ------------------------------------------------------------------ mutex

def test_mutex_sequential_acquire_release_is_valid():
    h = H().call(1, "acquire").call(1, "release").call(2, "acquire")
    assert check_ops(h.ops, "mutex")["valid"] is True


def test_mutex_two_holders_at_once_is_invalid():
    h = H().call(1, "acquire").call(2, "acquire")
    result = check_ops(h.ops, "mutex")
    assert result["valid"] is False
    assert result["counterexample"]["op"]["process"] == 2


def test_mutex_crashed_release_may_have_happened():
    h = H().call(1, "acquire").call(1, "release", kind="info").call(2, "acquire")
    assert check_ops(h.ops, "mutex")["valid"] is True


def test_mutex_failed_release_did_not_happen():
    h = H().call(1, "acquire").call(1, "release", kind="fail").call(2, "acquire")
    assert check_ops(h.ops, "mutex")["valid"] is False


# ------------------------------------------------------------ registers

def test_register_read_nil_matches_anything_and_info_read_constrains_nothing():
    h = H().call(1, "write", 3).call(2, "read", None, None).call(3, "read", None, 9, kind="info")
    assert check_ops(h.ops, "register")["valid"] is True


def test_register_model_rejects_cas_ops():
    h = H().call(1, "cas", [0, 1])
    with pytest.raises(ValueError, match="register: unknown op f='cas'"):
        check_ops(h.ops, "register")


def test_cas_register_initial_value_matters():
    h = H().call(1, "cas", [0, 1]).call(2, "read", None, 1)
    assert check_ops(h.ops, "cas-register:0")["valid"] is True
    assert check_ops(h.ops, "cas-register")["valid"] is False  # initial nil


def test_concurrent_write_may_be_seen_or_not():
    h = H().inv(1, "write", 5).call(2, "read", None, 0).call(3, "read", None, 5).call(4, "read", None, 5)
    h.end(1, "write", 5)
    assert check_ops(h.ops, "cas-register:0")["valid"] is True
    h2 = H().inv(1, "write", 5).call(2, "read", None, 5).call(3, "read", None, 0).end(1, "write", 5)
    assert check_ops(h2.ops, "cas-register:0")["valid"] is False  # 5 then 0 with no second write


def test_multi_register_txns_are_atomic():
    ok = H().call(1, "txn", [["write", "x", 1], ["write", "y", 1]]) \
            .call(2, "txn", [["read", "x", None], ["read", "y", None]], [["read", "x", 1], ["read", "y", 1]])
    assert check_ops(ok.ops, "multi-register:{:x 0 :y 0}")["valid"] is True
    torn = H().inv(1, "txn", [["write", "x", 1], ["write", "y", 1]]) \
              .call(2, "txn", [["read", "x", None], ["read", "y", None]], [["read", "x", 1], ["read", "y", 0]]) \
              .end(1, "txn", [["write", "x", 1], ["write", "y", 1]])
    result = check_ops(torn.ops, "multi-register:{:x 0 :y 0}")
    assert result["valid"] is False
    assert result["counterexample"]["state"] in ({"x": 0, "y": 0}, {"x": 1, "y": 1})


def test_kv_checks_each_key_on_its_own():
    h = H().call(1, "write", ["a", 1]).call(2, "write", ["b", 2]) \
           .call(3, "read", ["a", None], ["a", 1]).call(4, "read", ["b", None], ["b", 1])
    result = check_ops(h.ops, "kv")
    assert result["valid"] is False
    assert result["keys"] == 2
    assert result["invalid_keys"] == ["b"]
    assert result["counterexample"]["key"] == "b"


# ------------------------------------------------------------------ log

def send(h, p, key, value, offset=None, kind="ok"):
    h.inv(p, "send", [key, value])
    return h.end(p, "send", [key, [offset, value]] if kind == "ok" else [key, value], kind)


def poll(h, p, reads):
    return h.inv(p, "poll").end(p, "poll", {str(k): [list(r) for r in v] for k, v in reads.items()})


def test_log_clean_history_is_valid():
    h = H()
    send(h, 0, 0, 100, 0)
    send(h, 1, 1, 200, 0)
    send(h, 0, 0, 101, 1)
    send(h, 0, 0, 102, kind="info")  # may exist
    send(h, 1, 1, 202, kind="fail")  # does not exist
    poll(h, 2, {0: [(0, 100), (1, 101), (2, 102)], 1: [(0, 200)]})
    result = check_ops(h.ops, "log")
    assert result["valid"] is True and result["keys"] == 2


def test_log_lost_write_is_invalid():
    h = H()
    send(h, 0, 0, 100, 0)
    send(h, 0, 0, 101, 1)
    poll(h, 2, {0: [(0, 100), (1, 999)]})  # offset 1 was acknowledged as 101
    result = check_ops(h.ops, "log")
    assert result["valid"] is False
    assert result["counterexample"]["op"]["f"] == "poll"
    assert result["counterexample"]["state"] == [100, 101]


def test_log_two_acknowledged_sends_at_one_offset_is_invalid():
    h = H()
    send(h, 0, 0, 100, 0)
    send(h, 1, 0, 101, 0)
    assert check_ops(h.ops, "log")["valid"] is False


def test_log_read_of_a_failed_send_is_invalid():
    h = H()
    send(h, 0, 0, 100, kind="fail")
    poll(h, 1, {0: [(0, 100)]})
    assert check_ops(h.ops, "log")["valid"] is False


def test_log_concurrent_sends_may_land_in_either_order():
    h = H().inv(0, "send", [0, 100]).inv(1, "send", [0, 101])
    h.end(1, "send", [0, [0, 101]]).end(0, "send", [0, [1, 100]])
    poll(h, 2, {0: [(0, 101), (1, 100)]})
    assert check_ops(h.ops, "log")["valid"] is True


def test_log_crashed_send_never_read_may_fill_a_gap():
    h = H()
    send(h, 0, 0, 100, 0)
    send(h, 1, 0, 101, kind="info")  # never read, yet it must be what sits at offset 1
    send(h, 0, 0, 102, 2)
    poll(h, 2, {0: [(0, 100), (2, 102)]})
    assert check_ops(h.ops, "log")["valid"] is True


def test_log_crashed_send_cannot_take_an_offset_read_with_another_value():
    h = H()
    send(h, 0, 0, 100, 0)
    send(h, 1, 0, 101, kind="info")
    send(h, 0, 0, 102, 2)
    poll(h, 2, {0: [(1, 103)]})  # offset 1 holds a value nobody sent
    assert check_ops(h.ops, "log")["valid"] is False


def test_log_crashed_send_read_at_an_offset_must_have_landed_there_in_time():
    h = H()
    send(h, 0, 0, 100, 0)
    poll(h, 2, {0: [(0, 100), (1, 101)]})  # 101 read before its send was even invoked
    send(h, 1, 0, 101, kind="info")
    assert check_ops(h.ops, "log")["valid"] is False


def test_log_acknowledged_send_ahead_of_the_log_end_is_invalid():
    h = H()
    send(h, 0, 0, 100, 1)  # nothing could be at offset 0
    assert check_ops(h.ops, "log")["valid"] is False


def test_check_file_on_a_harness_jsonl_history(tmp_path):
    h = H()
    send(h, 0, 3, 100, 0)
    h.ops.append({"index": len(h.ops), "process": "nemesis", "type": "info", "f": "kill", "value": ["n2"]})
    poll(h, 1, {3: [(0, 100)]})
    path = tmp_path / "history.jsonl"
    write_jsonl(h.ops, path)
    result = check_file(path, "log")
    assert result["valid"] is True and result["keys"] == 1 and result["file"] == str(path)
    json.dumps(result)


# ------------------------------------------------------------ limits and errors

def hard_history(n=14):
    """n concurrent writes then a read of a value none wrote: the search must try every subset."""
    h = H()
    for p in range(n):
        h.inv(p, "write", p)
    h.call(100, "read", None, 99)
    for p in range(n):
        h.end(p, "write", p)
    return h.ops


def test_time_limit_gives_unknown():
    result = check_ops(hard_history(), "cas-register:0", time_limit=0)
    assert result["valid"] == "unknown"
    assert result["reason"] == ["time-limit"]


def test_memory_limit_gives_unknown():
    result = check_local(hard_history(), "cas-register:0", max_configs=100)
    assert result["valid"] == "unknown"
    assert result["reason"] == ["memory-limit"]


def test_hard_history_without_limit_is_invalid():
    assert check_ops(hard_history(10), "cas-register:0")["valid"] is False


def test_unknown_model_and_engine_are_errors():
    with pytest.raises(ValueError, match="unknown model 'queue'"):
        check_ops([], "queue")
    with pytest.raises(ValueError, match="unknown engine 'flink'"):
        check_ops([], "cas-register", engine="flink")


def test_empty_history_is_valid():
    assert check_ops([], "log")["valid"] is True

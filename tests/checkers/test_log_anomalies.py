"""The in-process log kernel: each anomaly type is found where injected, and only there."""

import pytest

from checkers import log_anomalies
from tests.checkers import log_histories as histories

pytestmark = pytest.mark.unit


def found_types(result):
    return {name for name, n in result["counts"].items() if n}


def test_clean_history_is_valid():
    result = log_anomalies.check(histories.clean().ops)
    assert result["valid"] is True
    assert found_types(result) == set()
    assert set(result["counts"]) == set(log_anomalies.ANOMALIES)


@pytest.mark.parametrize("name", sorted(histories.ANOMALOUS))
def test_injected_anomaly_is_found_and_nothing_else(name):
    result = log_anomalies.check(histories.ANOMALOUS[name]().ops)
    assert result["valid"] is False
    assert found_types(result) == histories.EXPECTED[name]
    assert result["counts"][name] == 1
    example = result["examples"][name][0]
    assert example["key"] in (0, 1)
    assert example["ops"], "examples name the history ops involved"


def test_lost_write_example_points_at_send_and_reader():
    h = histories.lost_write()
    example = log_anomalies.check(h.ops)["examples"]["lost-write"][0]
    assert example["value"] == 103 and example["offset"] == 3 and example["max_read_offset"] == 4
    send_done, reader = example["ops"]
    assert h.ops[send_done]["value"] == [0, [3, 103]]
    assert h.ops[reader]["f"] == "poll" and h.ops[reader]["value"] == {"0": [[4, 104]]}


def test_unread_info_send_is_neither_lost_nor_unseen():
    h = histories.body()
    h.send(0, 1, 203, kind="info")
    h.send(1, 1, 204, 3)
    h.poll(4, {1: [(3, 204)]})
    result = log_anomalies.check(histories.finish(h).ops)
    assert result["valid"] is True


def test_reading_an_info_send_is_fine_but_a_failed_one_is_not():
    h = histories.body()
    h.send(0, 1, 203, kind="info")
    h.poll(4, {1: [(2, 203)]})
    assert log_anomalies.check(histories.finish(h).ops)["valid"] is True
    aborted = histories.aborted_read().ops
    example = log_anomalies.check(aborted)["examples"]["aborted-read"][0]
    assert (example["key"], example["value"], example["offsets"]) == (1, 202, [2])
    failed_send, reader = example["ops"]
    assert aborted[failed_send]["type"] == "fail" and aborted[failed_send]["value"] == [1, 202]
    assert [2, 202] in aborted[reader]["value"]["1"]


def test_unknown_offsets_are_not_skips():
    """Offsets nobody observed (a gap in the known offsets) are not counted as skipped."""
    h = histories.body()
    h.send(0, 1, 205, 5)
    h.poll(2, {1: [(5, 205)]})  # 1 -> 5, but 2..4 were never observed anywhere
    assert log_anomalies.check(histories.finish(h).ops)["counts"]["poll-skip"] == 0


def test_repeated_offset_within_a_poll_is_nonmonotonic():
    h = histories.body()
    h.poll(4, {0: [(0, 100), (0, 100)]})
    result = log_anomalies.check(histories.finish(h).ops)
    assert found_types(result) == {"nonmonotonic-poll"}
    assert result["examples"]["nonmonotonic-poll"][0]["delta"] == 0


def test_final_phase_starts_new_consumer_sessions():
    """Re-reading from offset 0 after the final op is expected, not nonmonotonic."""
    h = histories.body()
    h.final()
    h.poll(2, {0: [(0, 100), (1, 101), (2, 102)], 1: [(0, 200), (1, 201)]})
    assert log_anomalies.check(h.ops)["valid"] is True


def test_send_without_completion_counts_as_indefinite():
    h = histories.body()
    h.invoke_send(7, 1, 203)          # the harness died before the completion
    result = log_anomalies.check(histories.finish(h).ops)
    assert result["valid"] is True


def test_empty_history_is_unknown():
    assert log_anomalies.check([])["valid"] == "unknown"


def test_realtime_order_needs_completion_before_invocation():
    """Concurrent sends may take offsets in either order."""
    h = histories.body()
    h.invoke_send(5, 1, 204)
    h.invoke_send(6, 1, 203)
    h.complete_send(5, 1, 204, 3)
    h.complete_send(6, 1, 203, 2)
    h.poll(4, {1: [(2, 203), (3, 204)]})
    assert log_anomalies.check(histories.finish(h).ops)["valid"] is True


# -- the consumer's semantics (issue 29) --------------------------------------

@pytest.mark.parametrize("name", sorted(histories.CONSUMER))
def test_consumer_case_shows_exactly_its_anomalies(name):
    make, expected = histories.CONSUMER[name]
    result = log_anomalies.check(make().ops)
    assert found_types(result) == expected
    assert result["valid"] is (not expected)
    for kind in expected:
        assert result["counts"][kind] == 1, kind


def test_a_kept_key_is_compared_across_the_reassignment():
    example = log_anomalies.check(histories.reassigned_then_backwards().ops)["examples"]
    assert example["nonmonotonic-poll"][0]["offsets"] == [2, 1]
    skip = log_anomalies.check(histories.resubscribed_then_skip().ops)["examples"]["poll-skip"][0]
    assert (skip["key"], skip["offsets"], skip["delta"]) == (0, [2, 4], 2)


def test_a_seek_still_starts_every_key_afresh():
    """seek, reset and crash (and an assign that seeks to the beginning) end every stream."""
    for f, extra in (("seek", {}), ("reset", {}), ("crash", {}),
                     ("assign", {"seek-to-beginning?": True})):
        h = histories.body()
        h.assign(2, [0, 1], f=f)
        h.ops[-1].update(extra)
        h.poll(2, {0: [(0, 100)]})
        assert log_anomalies.check(histories.finish(h).ops)["valid"] is True, f


def test_a_failed_reassignment_keeps_every_stream():
    h = histories.body()
    h.assign(2, [], f="assign")
    h.ops[-1]["type"] = "fail"
    h.poll(2, {0: [(1, 101)]})
    assert found_types(log_anomalies.check(histories.finish(h).ops)) == {"nonmonotonic-poll"}


def test_timed_out_sends_are_placed_where_reads_show_them():
    example = log_anomalies.check(histories.timed_out_sends_read_reversed().ops)["examples"]
    found = example["nonmonotonic-send"][0]
    assert (found["key"], found["offsets"], found["values"]) == (1, [3, 2], [204, 203])
    assert "realtime-order" not in example  # a timed-out send has no completion to order by


def test_an_unread_timed_out_send_does_not_break_the_process_order():
    """Acknowledged at 3, then a timed-out send nobody read, then acknowledged at 2: the
    two acknowledged sends are still compared."""
    h = histories.body()
    h.send(5, 1, 203, 3)
    h.send(5, 1, 209, kind="info")
    h.send(5, 1, 204, 2)
    h.poll(4, {1: [(2, 204), (3, 203)]})
    assert log_anomalies.check(histories.finish(h).ops)["counts"]["nonmonotonic-send"] == 1

"""The in-process replica-log diff on hand-made dumps."""

from checkers import replica_diff
from tests.checkers import log_dumps, log_histories
import pytest

pytestmark = pytest.mark.unit


def found(result):
    return {name for name, n in result["counts"].items() if n}


def history():
    return log_histories.clean().ops


def test_agreeing_replicas_are_valid_despite_an_uncommitted_divergent_tail():
    result = replica_diff.check(log_dumps.agreeing(), history())
    assert result["valid"] is True and found(result) == set()


def test_divergence_below_both_hws_is_found():
    result = replica_diff.check(log_dumps.divergent(), history())
    assert result["valid"] is False and found(result) == {"divergence"}
    example = result["examples"]["divergence"][0]
    assert (example["key"], example["offset"]) == (1, 1)
    assert example["replicas"] == [["n1", 0, 201], ["n2", 1, 777], ["n3", 0, 201]]
    assert example["differs_in"] == "value"
    ops = history()
    assert [ops[i]["value"] for i in example["ops"]] == [[1, [1, 201]]]


def test_the_same_record_in_another_leader_epoch_is_divergence_that_differs_in_the_epoch():
    result = replica_diff.check(log_dumps.epoch_only(), history())
    assert result["valid"] is False and found(result) == {"divergence"}
    [example] = result["examples"]["divergence"]
    assert example["replicas"] == [["n1", 0, 201], ["n2", 32, 201], ["n3", 0, 201]]
    assert example["differs_in"] == "epoch"


def test_divergence_needs_the_offset_committed_on_both_sides():
    dumps = log_dumps.divergent()
    dumps["n2"]["partitions"][1]["hw"] = 1  # n2's 777 is above its own HW now
    assert replica_diff.check(dumps, history())["counts"]["divergence"] == 0


def test_a_hole_below_the_hw_is_missing_committed_and_loses_the_acknowledged_write():
    result = replica_diff.check(log_dumps.missing_committed(), history())
    assert found(result) == {"missing-committed", "lost-acknowledged"}
    assert result["examples"]["missing-committed"] == [
        {"key": 0, "first_offset": 1, "last_offset": 1, "ops": []}]
    assert result["examples"]["lost-acknowledged"][0]["value"] == 101


def test_acknowledged_send_absent_from_every_replica():
    result = replica_diff.check(log_dumps.lost_acknowledged(), history())
    assert result["valid"] is False and found(result) == {"lost-acknowledged"}
    assert result["counts"]["lost-acknowledged"] == 1
    assert result["examples"]["lost-acknowledged"][0]["offset"] == 1


def test_records_removed_by_retention_are_not_missing():
    dumps = log_dumps.agreeing()
    for node in dumps:
        part = dumps[node]["partitions"][0]
        part["records"] = [r for r in part["records"] if r[0] >= 2]
        part["log_start"] = 2
    assert replica_diff.check(dumps, history())["valid"] is True


def test_missing_dumps_make_loss_unknown_but_divergence_stays_definite():
    dumps = log_dumps.lost_acknowledged()
    partial = replica_diff.check(dumps, history(), missing_nodes=["n4"])
    assert partial["valid"] == "unknown" and partial["counts"]["lost-acknowledged"] == 1
    divergent = replica_diff.check(log_dumps.divergent(), history(), missing_nodes=["n4"])
    assert divergent["valid"] is False


def test_no_dumps_is_unknown():
    assert replica_diff.check({}, history())["valid"] == "unknown"

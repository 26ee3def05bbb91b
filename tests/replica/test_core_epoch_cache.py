"""The leader epoch cache lookups of the two epoch generations."""

from replica.core.epoch_cache import UNDEFINED, EpochCache
import pytest

pytestmark = pytest.mark.unit


def test_assign_ignores_older_epochs_and_replaces_conflicting_entries():
    c = EpochCache()
    assert c.assign(0, 0) and not c.assign(0, 5) and not c.assign(-1, 7)
    assert c.assign(2, 4)
    assert c.assign(3, 2)          # a newer epoch that starts earlier drops the entry at 4
    assert c.entries == [(0, 0), (3, 2)]


def test_truncate_from_end_drops_entries_at_or_above_the_offset():
    c = EpochCache([(0, 0), (1, 3), (2, 5)])
    assert c.truncate_from_end(5) and c.entries == [(0, 0), (1, 3)]
    assert not c.truncate_from_end(4)
    assert c.truncate_from_end(3) and c.entries == [(0, 0)]


def test_kip101_answer():
    c = EpochCache([(0, 0), (3, 2)])
    assert c.kip101_end_offset(3, 7) == 7          # latest epoch: LEO
    assert c.kip101_end_offset(1, 7) == 2          # start of the first larger epoch
    assert c.kip101_end_offset(4, 7) == UNDEFINED  # nothing larger
    assert EpochCache().kip101_end_offset(0, 5) == UNDEFINED


def test_kafka_2_6_answer_names_the_epoch_it_answers_for():
    c = EpochCache([(0, 0), (3, 2)])
    assert c.end_offset_for(3, 7) == (3, 7)
    assert c.end_offset_for(1, 7) == (0, 2)        # KAFKA-6361: largest epoch <= 1 is 0
    assert c.end_offset_for(4, 7) == (UNDEFINED, UNDEFINED)
    assert EpochCache([(2, 5)]).end_offset_for(1, 9) == (1, 5)
    assert c.end_offset_for(UNDEFINED, 7) == (UNDEFINED, UNDEFINED)

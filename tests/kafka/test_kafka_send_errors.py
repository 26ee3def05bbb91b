"""What a Kafka send's error proves (systems/kafka/client.py): librdkafka re-sends a
batch answered NOT_LEADER_OR_FOLLOWER to the new leader without counting a retry,
though a leader that appended it and stepped down answers exactly that; so no
delivery report's error is definite except the topic's absence, and only what
produce() refused before sending is."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from harness.sut import AbsentError, DefiniteError, IndefiniteError
from systems.kafka.client import _fatal, classify, classify_delivery

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("code", [KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_LEADER_FOR_PARTITION,
                                  KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, KafkaError.REQUEST_TIMED_OUT,
                                  KafkaError._MSG_TIMED_OUT, KafkaError.LEADER_NOT_AVAILABLE,
                                  KafkaError.FENCED_LEADER_EPOCH, KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER])
def test_a_delivery_error_may_follow_an_appended_copy(code):
    assert classify_delivery(KafkaError(code)) is IndefiniteError


def test_a_topic_the_broker_does_not_know_is_a_definite_absence():
    assert classify_delivery(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)) is AbsentError
    assert issubclass(AbsentError, DefiniteError)


def test_what_produce_refused_was_never_sent():
    assert classify(KafkaError(KafkaError._QUEUE_FULL)) is DefiniteError
    assert classify(KafkaError(KafkaError._TRANSPORT)) is IndefiniteError


def test_a_fatal_error_retires_the_producer():
    assert _fatal(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))
    assert not _fatal(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS))
    assert not _fatal("not a KafkaError")

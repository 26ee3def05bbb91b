"""Jepsen-style fault-injection harness for Kafka-style replicated logs."""

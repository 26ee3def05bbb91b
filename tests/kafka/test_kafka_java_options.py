"""The Kafka options of the Java client (systems/kafka/__init__.py): `client_version`
follows the broker's `version`, belongs to client=java only, and must be a client the
program builds against (3.0 or later); client=java has transactions (the queue workload)
on the versions that have them."""
import pytest
from pydantic import ValidationError

from harness.sut import TRANSACTIONS
from systems.kafka import SYSTEM

pytestmark = pytest.mark.unit


def test_the_client_version_follows_the_broker_unless_given():
    assert SYSTEM.parse_options({}).client == "librdkafka"
    assert SYSTEM.parse_options({}).client_version is None
    assert SYSTEM.parse_options({"client": "java"}).client_version == "4.1.1"
    assert SYSTEM.parse_options({"client": "java", "version": "4.2.1"}).client_version == "4.2.1"
    assert SYSTEM.parse_options({"client": "java", "version": "2.8.2", "client_version": "4.1.1"}).model_dump()[
        "client_version"] == "4.1.1"


@pytest.mark.parametrize("options, text", [
    ({"client_version": "4.1.1"}, "add client=java"),
    ({"client": "java", "version": "2.8.2"}, "client_version=4.1.1"),
    ({"client": "java", "client_version": "2.8.2"}, "kafka-clients 3.0 or later"),
    ({"client": "jvm"}, "librdkafka"),
])
def test_a_client_the_program_cannot_be_is_refused_in_one_line(options, text):
    with pytest.raises(ValidationError) as e:
        SYSTEM.parse_options(options)
    assert text in str(e.value)


def test_the_java_client_has_transactions_where_the_broker_has_them():
    assert SYSTEM.capabilities_in({}, {}).has(TRANSACTIONS)
    assert SYSTEM.capabilities_in({}, {"client": "java"}).has(TRANSACTIONS)
    old = SYSTEM.capabilities_in({}, {"client": "java", "version": "0.10.2.2", "client_version": "3.9.1"})
    assert not old.has(TRANSACTIONS) and "0.11" in old[TRANSACTIONS]


def test_the_transaction_version_is_the_clusters_default_unless_given():
    """KIP-890's feature level is filled in (test.json names what the cluster was formatted with)."""
    assert SYSTEM.parse_options({}).transaction_version == 2
    assert SYSTEM.parse_options({"transaction_version": 1}).transaction_version == 1
    assert SYSTEM.parse_options({"version": "3.9.1"}).transaction_version == 0
    assert SYSTEM.parse_options({"version": "3.9.1"}).elr is False   # 3.9 has no ELR feature
    assert SYSTEM.parse_options({"version": "2.8.2"}).transaction_version is None
    again = SYSTEM.parse_options(SYSTEM.parse_options({"version": "3.9.1"}).model_dump())
    assert (again.transaction_version, again.elr) == (0, False)


@pytest.mark.parametrize("options, text", [
    ({"version": "2.8.2", "transaction_version": 1}, "runs on ZooKeeper"),
    ({"version": "3.9.1", "transaction_version": 2}, "transaction.version 0 only"),
    ({"version": "3.9.1", "elr": True}, "no eligible.leader.replicas.version"),
    ({"transaction_version": 3}, "transaction_version"),
    ({"version": "3.8.0"}, "3.9.x"),
])
def test_a_transaction_version_the_cluster_cannot_have_is_refused_in_one_line(options, text):
    with pytest.raises(ValidationError) as e:
        SYSTEM.parse_options(options)
    assert text in str(e.value)


def test_the_transaction_coordinator_partition_is_kafkas():
    """Utils.abs(transactionalId.hashCode()) % partitions, as kafka-clients 4.1.1's jshell
    printed them (2026-11-28): Java's String.hashCode over UTF-16 code units."""
    from systems.kafka.coordinator import java_string_hash, partition_for

    assert java_string_hash("hello") == 99162322
    assert java_string_hash("replog-abc-p0") == 2135914001
    assert java_string_hash("\u00e9t\u00e9-\U0001F600") == -1803456526   # a surrogate pair: two code units
    assert partition_for("replog-1f2e3d4c-p17", 50) == 1
    # negative hashes: Utils.abs is Math.abs (a run's broker log: "Initialized transactionalId
    # replog-91372665-p0 ... on partition __transaction_state-20", p13 on 28)
    assert partition_for("replog-91372665-p0", 50) == 20 and partition_for("replog-91372665-p13", 50) == 28


def test_producer_properties_come_as_a_map_or_as_name_value_pairs():
    """The `producer` option (a scenario's client configuration, e.g. kafka-late-commit's):
    a map in a spec or scenario, `name:value,name:value` from the command line; values are
    the clients' property strings."""
    want = {"delivery.timeout.ms": "4600", "metadata.max.age.ms": "300000"}
    assert SYSTEM.parse_options({}).producer == {}
    assert SYSTEM.parse_options({"producer": {"delivery.timeout.ms": 4600, "metadata.max.age.ms": 300000}}
                                ).producer == want
    assert SYSTEM.parse_options({"producer": "delivery.timeout.ms:4600, metadata.max.age.ms:300000"}).producer == want
    assert SYSTEM.parse_options({"producer": {"enable.idempotence": True}}).producer == {"enable.idempotence": "true"}
    with pytest.raises(ValidationError) as e:
        SYSTEM.parse_options({"producer": "delivery.timeout.ms=4600"})
    assert "give name:value pairs separated by commas" in str(e.value)

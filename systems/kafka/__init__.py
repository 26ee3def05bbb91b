"""Apache Kafka (4.x and 3.9 on KRaft; 0.10.2, 0.11.0 and 2.8 on ZooKeeper; jars from
Maven Central, confluent-kafka on the data path) as a system under test.

ZooKeeper era (`version` 0.10.2.2, 0.11.0.3 or 2.8.2): one ZooKeeper server
(the version's own, from its jars) on the role host `zk`, brokers on n1..nN;
KRaft-only settings are rendered as their ZooKeeper-era equivalents
(systems/kafka/config.py ZK_EQUIVALENTS); the inspector reads leaders and ISR
from the Metadata API (no DescribeTopicPartitions; no leader epoch, no ELR).

Hosts: brokers n1..nN (broker id i on n<i>) and, by default, one
controller-only KRaft node on the role host `ctl` (id 100): with a combined
quorum of three, two nodes down would also stop the metadata quorum, which
breaks the scenarios that take two brokers down. `controllers: combined`
runs broker and controller in one process on every node instead.

Key k is partition k of topic `log`. Settings are Kafka's own names
(systems/kafka/settings/<line>.txt lists them; an unknown one is refused
before any host exists); topic settings go to CreateTopics, broker settings to
every broker's properties.

System options: `version` (the jars: systems/kafka/maven/pom.xml, resolved
into build/kafka/<version>/lib), `elr` (KIP-966's eligible.leader.replicas.version
feature, set when the metadata is formatted), `fsync` (none: Kafka's default,
the OS flushes; every: log.flush.interval.messages=1), `controllers`
(dedicated | combined), `idempotent` (the client's idempotent producer
instead of one broker answer per send), `java` (the launcher on the hosts),
`client` (librdkafka | java: Kafka's Java client, one JVM per run serving every
client process, systems/kafka/java_client.py), `client_version` (the Java client's
kafka-clients release; default: `version`) and `transaction_version` (KIP-890's
feature level, set when the storage is formatted; KRaft only).

Tiered storage (`tiered`, or the setting remote.storage.enable: true; 4.x only):
Kafka's LocalTieredStorage in a directory every broker of the run shares, the
topic-based remote log metadata (systems/kafka/tiered.py).

Dumps: each stopped broker's segment files are read back (record batch v2
with its partitionLeaderEpoch; systems/kafka/segments.py, run on the host), so
the replica diff compares real Kafka replicas offset by offset.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import field_validator, model_validator

from harness.sut import (CHECKPOINTS, CLOCK, DATA_FILES, DUMP, EVENTS, INSPECT, OFFSETS, PAUSE, PROCESS, REMOTE_TIER,
                         MEMBERSHIP, TRANSACTIONS, WIPE, Parts, System, SystemOptions)

CONTROLLER = "ctl"
ZOOKEEPER = "zk"
DEFAULT_VERSION = "4.1.1"
# The replication eras on ZooKeeper (one ZooKeeper server on the role host `zk`):
# 0.10.2 (high-watermark truncation), 0.11.0 (KIP-101 leader epochs), 2.8 (KIP-279).
ZK_VERSIONS = ("0.10.2.2", "0.11.0.3", "2.8.2")
# 3.9.1: the last release before KIP-890's transaction protocol v2 (KRaft; transaction.version 0 only)
KRAFT_3 = ("3.9.1",)
VERSIONS = (*ZK_VERSIONS, *KRAFT_3, "4.0.1", "4.1.1", "4.2.1")   # served by Maven Central (mvn dependency:get), 2026-11-26
# transaction.version when the option does not say: Kafka's own default of a fresh cluster
# (4.x: 2, KIP-890's epoch bump per transaction; 3.9: 0, its levels 1 and 2 need metadata 4.0)
DEFAULT_TRANSACTION_VERSION = 2


class KafkaOptions(SystemOptions):
    version: str = DEFAULT_VERSION
    elr: bool = True
    fsync: Literal["none", "every"] = "none"
    controllers: Literal["dedicated", "combined"] = "dedicated"
    idempotent: bool = False
    java: str = "java"   # the Java launcher on the hosts (17 or later), e.g. a JDK's bin/java
    # KIP-405 tiered storage (4.x): LocalTieredStorage in a remote directory every broker shares,
    # the topic-based remote log metadata manager (systems/kafka/tiered.py); also on when the
    # settings have remote.storage.enable: true
    tiered: bool = False
    # The client of the workload's sends and polls: confluent-kafka (librdkafka), or Kafka's own
    # Java client in one JVM per run (systems/kafka/java_client.py); `client_version` is the
    # Java client's kafka-clients release (default: the broker's `version`).
    client: Literal["librdkafka", "java"] = "librdkafka"
    client_version: str | None = None
    # KIP-890's transaction.version feature level of a KRaft cluster, set when its storage is
    # formatted (`StorageTool format --feature transaction.version=N`): 2 is the epoch bump per
    # transaction (protocol v2), 0 and 1 the original protocol. None: the version's default
    # (4.x: 2; 3.9: 0), filled in here. Refused on ZooKeeper, and 1 or 2 on 3.9.
    transaction_version: Literal[0, 1, 2] | None = None
    # Producer properties of the `queue` workload's client over the harness's own (kafka-clients
    # names with client=java, librdkafka's otherwise), e.g. a scenario that needs the client's
    # delivery timeout just past its request timeout: {delivery.timeout.ms: 4600}. From the
    # command line: `--option producer=delivery.timeout.ms:4600,metadata.max.age.ms:300000`.
    producer: dict[str, str] = {}

    @field_validator("producer", mode="before")
    @classmethod
    def _producer_settings(cls, v):
        if isinstance(v, str):
            pairs = [item.split(":", 1) for item in v.split(",") if item.strip()]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError(f"producer={v!r}: give name:value pairs separated by commas, e.g. "
                                 f"producer=delivery.timeout.ms:4600,metadata.max.age.ms:300000")
            return {name.strip(): value.strip() for name, value in pairs}
        if isinstance(v, dict):
            return {str(k): (str(val).lower() if isinstance(val, bool) else str(val)) for k, val in v.items()}
        return v

    @model_validator(mode="after")
    def _transaction_version(self) -> "KafkaOptions":
        tv = self.transaction_version
        if tv is None:   # the version's default, so that test.json names the level the cluster has
            if self.version not in ZK_VERSIONS:
                self.transaction_version = DEFAULT_TRANSACTION_VERSION if int(self.version.split(".")[0]) >= 4 else 0
            return self
        if self.version in ZK_VERSIONS:
            raise ValueError(f"transaction_version={tv}: Kafka {self.version} runs on ZooKeeper, where transactions "
                             f"have only the original protocol and no feature levels; drop transaction_version or "
                             f"use version=4.1.1 (KRaft)")
        if int(self.version.split(".")[0]) < 4 and tv > 0:
            raise ValueError(f"transaction_version={tv}: Kafka {self.version} has transaction.version 0 only (levels "
                             f"1 and 2, KIP-890, need metadata version 4.0); use version=4.1.1 for {tv}, or drop "
                             f"transaction_version")
        return self

    @model_validator(mode="after")
    def _elr_version(self) -> "KafkaOptions":
        """3.9 has no ELR (KIP-966 is 4.0's): off by default there, refused when asked for."""
        if self.version in KRAFT_3 and self.elr:
            if "elr" in self.model_fields_set:
                raise ValueError(f"elr=true: Kafka {self.version} has no eligible.leader.replicas.version feature "
                                 f"(KIP-966 is 4.0's); drop elr or use version=4.1.1")
            self.elr = False
        return self

    @model_validator(mode="after")
    def _client_version(self) -> "KafkaOptions":
        if self.client == "librdkafka":
            if self.client_version is not None:
                raise ValueError(f"client_version={self.client_version} is the Java client's (kafka-clients); "
                                 f"with client=librdkafka the client is the installed confluent-kafka: drop "
                                 f"client_version or add client=java")
            return self
        v = self.client_version or self.version
        if not re.fullmatch(r"\d+\.\d+\.\d+(\.\d+)?", v) or int(v.split(".")[0]) < 3:
            raise ValueError(f"client=java needs kafka-clients 3.0 or later (client_version {v}"
                             f"{'' if self.client_version else ', the broker version'}); give one, e.g. "
                             f"client_version={DEFAULT_VERSION} (4.x clients talk to brokers 2.1 and later)")
        self.client_version = v
        return self

    @field_validator("version")
    @classmethod
    def _kraft_version(cls, v: str) -> str:
        if v in ZK_VERSIONS:
            return v
        if not re.fullmatch(r"\d+\.\d+\.\d+", v):
            raise ValueError(f"version {v!r}: give a Kafka release like {DEFAULT_VERSION} or one of "
                             f"{', '.join(ZK_VERSIONS)}")
        if int(v.split(".")[0]) < 4 and not v.startswith("3.9."):
            raise ValueError(f"version {v}: before 4.0 this adapter runs {', '.join(ZK_VERSIONS)} (on ZooKeeper), "
                             f"3.9.x (KRaft, e.g. {KRAFT_3[0]}) and 4.0.0 or later on KRaft")
        return v


def _tiered(settings: dict, options: KafkaOptions) -> bool:
    """`--option tiered=true` or the topic setting remote.storage.enable (systems/kafka/tiered.py)."""
    from systems.kafka.tiered import enabled
    return enabled(settings, options)


def plan_roles(settings: dict, options: KafkaOptions | None = None) -> dict:
    """The controller host (KRaft), unless the quorum is combined into the brokers;
    the ZooKeeper host for the ZooKeeper-era versions."""
    from systems.kafka.install import zk_era

    if options is not None and zk_era(options.version):
        return {"zookeeper": ZOOKEEPER}
    if options is not None and options.controllers == "combined":
        return {}
    return {"controller": CONTROLLER}


NO_TRANSACTIONS = ("Kafka {version} has no transactions or transactional offset commits (they came with 0.11, "
                   "KIP-98); use --option version=0.11.0.3, 2.8.2 or 4.x")


def capabilities_for(settings: dict, options: KafkaOptions) -> dict:
    """Every version; a remote tier only with tiered storage on (4.x); transactions from 0.11 on."""
    return {
        PROCESS: None, PAUSE: None, INSPECT: None, DUMP: None, CHECKPOINTS: None, EVENTS: None, DATA_FILES: None,
        OFFSETS: None,
        CLOCK: "the JVM's clock under libfaketime is not verified yet; clock faults are refused",
        REMOTE_TIER: None if _tiered(settings, options) else
        "tiered storage is off in this run: turn it on with --option tiered=true (Kafka 4.x), "
        "or the topic setting remote.storage.enable: true",
        TRANSACTIONS: NO_TRANSACTIONS.format(version=options.version) if options.version.startswith("0.10.") else None,
        WIPE: None,
        MEMBERSHIP: None if options.version not in ("0.10.2.2", "0.11.0.3") else
        f"Kafka {options.version} has no AlterPartitionReassignments (KIP-455, Kafka 2.4): use 2.8.2 or 4.x",
    }


def parts() -> Parts:
    from systems.kafka.client import KafkaLogClient
    from systems.kafka.db import KafkaDb
    from systems.kafka.inspector import KafkaInspector
    from systems.kafka.membership import KafkaMembership
    from systems.kafka.queue import KafkaQueueClient
    from systems.kafka.tiered import KafkaRemoteTier

    return Parts(db=KafkaDb, client=KafkaLogClient, process=KafkaDb, pausable=KafkaDb, inspector=KafkaInspector,
                 remote_tier=KafkaRemoteTier, queue_client=KafkaQueueClient, membership=KafkaMembership)


def check_settings(settings: dict, options: KafkaOptions) -> None:
    """Kafka's names only (ValueError, one line); the jars are resolved here,
    before any host exists, so a version Maven does not serve stops the run at once."""
    from systems.kafka import install, settings as names

    from systems.kafka import tiered

    names.check(settings, options.version)
    install.ensure_jars(options.version)
    if tiered.enabled(settings, options):
        if install.zk_era(options.version):
            raise ValueError(f"tiered storage (KIP-405) needs Kafka 4.x; {options.version} has none")
        install.ensure_tiered_jar(options.version)
    if options.client == "java":
        from systems.kafka.java_build import ensure_built
        ensure_built(options.client_version)


def node_events(nodes_dir):
    from systems.kafka.events import story_events

    return story_events(nodes_dir)


def setting_value(name: str, settings: dict, options: KafkaOptions) -> float:
    from systems.kafka.config import effective

    return float(effective(name, settings, options))


SYSTEM = System(
    name="kafka",
    description="Apache Kafka 4.x and 3.9 (KRaft) or 0.10.2/0.11/2.8 (ZooKeeper) (jars from Maven Central, "
                "confluent-kafka): topic `log`, controller ctl or zookeeper zk + brokers n1..nN",
    options=KafkaOptions,
    capabilities_for=capabilities_for,
    parts=parts,
    roles={"controller": CONTROLLER},
    plan_roles=plan_roles,
    check_settings=check_settings,
    setting_value=setting_value,
    variant_option="version",
    variants=VERSIONS,
    default_settings=lambda rf: {"min.insync.replicas": min(2, rf)},
    node_events=node_events,
    compare="systems.kafka.compare:compare_command",
)

"""A Kafka node's properties, rendered from the run's settings and options.

Node ids: broker n<i> is id i; the dedicated controller (`ctl`) is id 100.
Ports: 9092 for clients and replication (PLAINTEXT), 9093 for the KRaft
quorum (CONTROLLER). Everything a node writes lives under its data
directory (log.dirs and the metadata log), so a power or corrupt fault that
mounts or edits that directory reaches all of it.

Defaults that differ from Kafka's own are only those a three-node test
cluster needs (internal topics' replication, no topic auto-creation, no
rebalance delay); every replication setting keeps Kafka's default unless the
run sets it.
"""
from __future__ import annotations

from systems.kafka import settings as names

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
CONTROLLER_ID = 100
CLUSTER_ID_LENGTH = 22

# Kafka's defaults of the settings the harness reads (scenario bounds such as `2 x replica.lag.time.max.ms`).
KAFKA_DEFAULTS = {
    "replica.lag.time.max.ms": 30000, "broker.session.timeout.ms": 9000, "broker.heartbeat.interval.ms": 2000,
    "replica.high.watermark.checkpoint.interval.ms": 5000, "replica.fetch.wait.max.ms": 500,
    "min.insync.replicas": 1, "unclean.leader.election.enable": False, "segment.bytes": 1073741824,
    "log.segment.bytes": 1073741824, "replica.fetch.backoff.ms": 1000,
}


def effective(name: str, settings: dict, options) -> object:
    """The value a setting has in a run: the run's, fsync's, or Kafka's default."""
    if name in settings:
        return settings[name]
    if name in ("log.flush.interval.messages", "flush.messages") and options.fsync == "every":
        return 1
    if name in KAFKA_DEFAULTS:
        return KAFKA_DEFAULTS[name]
    raise ValueError(f"no known value for setting {name!r}: set it in the run's settings")


def fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def node_id(node: str) -> int:
    return CONTROLLER_ID if not node.startswith("n") else int(node[1:])


def render(node: str, roles: str, addresses: dict[str, str], voters: list[str], data_dir: str,
           settings: dict, options, replication_factor: int, tiered_store: tuple[str, str] | None = None) -> str:
    """server.properties of one node. `roles`: "broker", "controller" or
    "broker,controller"; `voters`: the quorum's host names; `tiered_store`:
    (the RemoteStorageManager's class path, the shared remote directory) when
    tiered storage is on (systems/kafka/tiered.py)."""
    me = addresses[node]
    quorum = ",".join(f"{node_id(v)}@{addresses[v]}:{CONTROLLER_PORT}" for v in voters)
    props: dict[str, object] = {
        "process.roles": roles,
        "node.id": node_id(node),
        "controller.quorum.voters": quorum,
        "controller.listener.names": "CONTROLLER",
        "log.dirs": data_dir,
    }
    listeners = []
    if "broker" in roles:
        listeners.append(f"PLAINTEXT://{me}:{BROKER_PORT}")
        props.update({
            "advertised.listeners": f"PLAINTEXT://{me}:{BROKER_PORT}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "offsets.topic.replication.factor": replication_factor,
            "transaction.state.log.replication.factor": replication_factor,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": replication_factor,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": False,
        })
    if "controller" in roles:
        listeners.append(f"CONTROLLER://{me}:{CONTROLLER_PORT}")
        props.setdefault("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT")
    props["listeners"] = ",".join(listeners)
    if options.fsync == "every":
        props["log.flush.interval.messages"] = 1
    broker_settings, _topic = names.split(settings, options.version)
    if tiered_store is not None and "broker" in roles:
        from systems.kafka import tiered

        class_path, remote = tiered_store
        props.update(tiered.broker_props(broker_settings, class_path, remote, replication_factor))
    elif tiered_store is not None:   # the controller validates CreateTopics' remote.storage.enable against it
        props["remote.log.storage.system.enable"] = True
    props.update(broker_settings)
    return "".join(f"{k}={fmt(v)}\n" for k, v in props.items())


ZK_PORT = 2181


def render_zk_broker(node: str, addresses: dict[str, str], zookeeper: str, data_dir: str, settings: dict,
                     options, replication_factor: int) -> str:
    """server.properties of a ZooKeeper-era broker (0.10.2, 0.11.0, 2.x): broker.id
    instead of node.id, zookeeper.connect instead of a quorum; only names the
    version knows (0.10.2 has no transaction or rebalance-delay settings). The
    log cleaner's dedupe buffer (128 MiB by default, allocated at startup) is
    made small so that a broker fits the small heap these tests give it."""
    me = addresses[node]
    line = tuple(int(x) for x in options.version.split(".")[:2])
    props: dict[str, object] = {
        "broker.id": node_id(node),
        "listeners": f"PLAINTEXT://{me}:{BROKER_PORT}",
        "advertised.listeners": f"PLAINTEXT://{me}:{BROKER_PORT}",
        "zookeeper.connect": f"{addresses[zookeeper]}:{ZK_PORT}",
        "log.dirs": data_dir,
        "offsets.topic.replication.factor": replication_factor,
        # the client's consumer group creates __consumer_offsets on first use: one partition, not
        # 50 (50 x replication factor replicas made at once on two cores timed a first send out)
        "offsets.topic.num.partitions": 1,
        "auto.create.topics.enable": False,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
    }
    if line >= (0, 11):
        props.update({"transaction.state.log.replication.factor": replication_factor,
                      "transaction.state.log.min.isr": 1, "group.initial.rebalance.delay.ms": 0})
    if options.fsync == "every":
        props["log.flush.interval.messages"] = 1
    broker_settings, _topic = names.split(settings, options.version)
    props.update(broker_settings)
    return "".join(f"{k}={fmt(v)}\n" for k, v in props.items())


def render_zookeeper(data_dir: str, address: str) -> str:
    """zoo.cfg of the one ZooKeeper server (standalone). tickTime 500 ms lets the
    brokers' sessions be as short as 1 s (ZooKeeper's floor is 2 ticks) and as long as
    3 minutes (the replaced-disk scenario holds a broker's session through a disk replacement); the admin
    server (ZooKeeper 3.5+, it needs Jetty) is off."""
    return (f"dataDir={data_dir}\nclientPort={ZK_PORT}\nclientPortAddress={address}\ntickTime=500\n"
            f"maxSessionTimeout=180000\nadmin.enableServer=false\n")


def topic_config(settings: dict, options) -> dict:
    """CreateTopics configs of the run's topic."""
    from systems.kafka import tiered

    _broker, topic = names.split(settings, options.version)
    out = dict(topic)
    if tiered.enabled(settings, options):
        out = tiered.topic_defaults(out)
    if options.fsync == "every":
        out.setdefault("flush.messages", 1)
    return out


LOG4J2 = """\
# One console appender: the daemon's stdout is the node's kafka.log; times in UTC (the reports' axis).
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{yyyy-MM-dd'T'HH:mm:ss.SSS'Z'}{UTC}] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.zk.name = org.apache.zookeeper
logger.zk.level = WARN
# The controller's decisions per partition ("partition change for log-0 ...: isr: [..] -> [..], leader: ..,
# elr: ..") are DEBUG lines: systems/kafka/events.py reads ISR changes from them.
logger.partitions.name = org.apache.kafka.controller.ReplicationControlManager
logger.partitions.level = DEBUG
"""


LOG4J1 = """\
# log4j 1.x (the ZooKeeper-era brokers): one console appender, the daemon's stdout is kafka.log; times in UTC.
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.EnhancedPatternLayout
log4j.appender.out.layout.ConversionPattern=[%d{yyyy-MM-dd'T'HH:mm:ss.SSS'Z'}{UTC}] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.org.I0Itec.zkclient=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.state.change.logger=INFO
"""

LOG4J1_ZOOKEEPER = LOG4J1.replace("log4j.logger.org.apache.zookeeper=WARN", "log4j.logger.org.apache.zookeeper=INFO")

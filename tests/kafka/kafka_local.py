"""One real Kafka 4.1.1 node on 127.0.0.1 for tests: KRaft combined mode
(process.roles=broker,controller, a static one-voter quorum), the jars from the
repository's build folder (`scripts/setup.sh` puts them there), and Kafka's own
`kafka.tools.DumpLogSegments` for the reader's reference output.

Used by tests/kafka/test_segments.py; `python tests/kafka/kafka_local.py OUT`
regenerates the committed fixture tests/data/kafka/ (see its README).
"""
from __future__ import annotations

import base64
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KAFKA_VERSION = "4.1.1"
LIB = REPO / "build" / "kafka" / KAFKA_VERSION / "lib"
JVM_OPTS = ["-Xmx256m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = org.apache.kafka
logger.kafka.level = info
"""


def jars_missing() -> str | None:
    """None when the Kafka jars are installed, else a message naming the fix."""
    if not LIB.is_dir() or not list(LIB.glob("kafka_2.13-*.jar")):
        return (f"the Kafka {KAFKA_VERSION} jars are not in {LIB.relative_to(REPO)}/: "
                "run `bash scripts/setup.sh` (it resolves them from Maven Central)")
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def classpath() -> str:
    return str(LIB) + "/*"


def java(main: str, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["java", *JVM_OPTS, "-cp", classpath(), main, *args],
                          capture_output=True, text=True, timeout=timeout, **kw)


class KafkaNode:
    """A one-node KRaft cluster in `work`; start() / stop() / kill()."""

    def __init__(self, work: Path, extra: dict | None = None):
        self.work = Path(work)
        self.log_dir = self.work / "data"
        self.port = free_port()
        self.ctl_port = free_port()
        self.proc: subprocess.Popen | None = None
        self.props = self.work / "server.properties"
        self.broker_log = self.work / "broker.log"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.ctl_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.ctl_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.index.interval.bytes": "1024",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "2",
            "log.cleaner.enable": "false",
        }
        settings.update(extra or {})
        self.settings = settings

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def format(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.props.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        (self.work / "log4j2.properties").write_text(LOG4J2)
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        out = java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(self.props))
        if out.returncode != 0:
            raise RuntimeError(f"StorageTool format failed: {out.stdout}{out.stderr}")

    def start(self, timeout: float = 90) -> None:
        if not self.props.exists():
            self.format()
        log = open(self.broker_log, "ab")
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTS, f"-Dlog4j2.configurationFile={self.work / 'log4j2.properties'}",
             "-cp", classpath(), "kafka.Kafka", str(self.props)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka exited with {self.proc.returncode}: {self.tail()}")
            if b"Kafka Server started" in self.broker_log.read_bytes():
                return
            time.sleep(0.3)
        raise RuntimeError(f"kafka not started after {timeout} s: {self.tail()}")

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.broker_log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM (a clean shutdown: checkpoints written, indexes trimmed), then wait."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"kafka did not stop within {timeout} s after SIGTERM")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


# -- Kafka's DumpLogSegments, parsed ---------------------------------------------
BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*?"
                        r"producerId: (-?\d+) .*?partitionLeaderEpoch: (-?\d+) isTransactional: (\w+) "
                        r"isControl: (\w+) .*? compresscodec: (\w+) crc: (\d+) isvalid: (\w+)")
RECORD_LINE = re.compile(r"^\| offset: (\d+) (.*)$")
MARKER = re.compile(r"endTxnMarker: (\w+)")


def dump_log_segments(files: list[Path]) -> str:
    """Kafka's own `DumpLogSegments --deep-iteration --print-data-log` text of segments."""
    out = java("kafka.tools.DumpLogSegments", "--files", ",".join(str(f) for f in files),
               "--print-data-log", "--deep-iteration")
    if out.returncode != 0:
        raise RuntimeError(f"DumpLogSegments failed: {out.stdout}{out.stderr}")
    return out.stdout


def parse_dump_log_segments(text: str) -> dict:
    """{"batches": [{"base", "last", "count", "pid", "epoch", "transactional", "control",
    "codec", "crc", "valid"}], "records": [[offset, epoch, payload text or None]],
    "markers": [[offset, "COMMIT" | "ABORT"]]}: control records go to markers."""
    batches, records, markers = [], [], []
    epoch = None
    for line in text.splitlines():
        m = BATCH_LINE.match(line)
        if m:
            base, last, count, pid, epoch_s, txn, ctl, codec, crc, valid = m.groups()
            epoch = int(epoch_s)
            batches.append({"base": int(base), "last": int(last), "count": int(count), "pid": int(pid),
                            "epoch": epoch, "transactional": txn == "true", "control": ctl == "true",
                            "codec": codec, "crc": int(crc), "valid": valid == "true"})
            continue
        m = RECORD_LINE.match(line)
        if m:
            offset, rest = m.groups()
            marker = MARKER.search(rest)
            if marker:
                markers.append([int(offset), marker.group(1)])
                continue
            # a null value has no `payload:` field at all
            at = rest.find(" payload: ")
            records.append([int(offset), epoch, rest[at + len(" payload: "):] if at >= 0 else None])
    return {"batches": batches, "records": records, "markers": markers}


# -- producing -----------------------------------------------------------------
class Acks:
    """Delivery reports of confluent-kafka producers: [(partition, offset, value bytes)]."""

    def __init__(self):
        self.ok: list[tuple[int, int, bytes | None]] = []
        self.errors: list[str] = []

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.ok.append((msg.partition(), msg.offset(), msg.value()))


def producer(node: KafkaNode, **conf):
    from confluent_kafka import Producer

    base = {"bootstrap.servers": node.bootstrap, "acks": "all", "log_level": 3}
    base.update(conf)
    return Producer(base)


def create_topic(node: KafkaNode, topic: str, partitions: int, config: dict) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 3})
    for _name, fut in admin.create_topics([NewTopic(topic, partitions, 1, config=config)]).items():
        fut.result(60)


def wait_for_leaders(node: KafkaNode, topic: str, partitions: int, timeout: float = 60) -> None:
    """Until every partition of `topic` has a leader (after a start or restart)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 3})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic, timeout=5)
            parts = md.topics[topic].partitions
            if len(parts) == partitions and all(p.leader == 1 and not p.error for p in parts.values()):
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{topic}: no leaders after {timeout} s")


def high_watermarks(node: KafkaNode, topic: str, partitions: int) -> dict[int, int]:
    """{partition: high watermark} as a consumer sees it."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "segments-test", "log_level": 3})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def send_one_by_one(node: KafkaNode, topic: str, values, partition_of, acks: Acks, **conf) -> None:
    """Each value in its own batch: one send, one flush (the workload's shape)."""
    p = producer(node, **conf)
    for v in values:
        p.produce(topic, v, partition=partition_of(v), on_delivery=acks)
        p.flush(30)


def send_batched(node: KafkaNode, topic: str, values, partition_of, acks: Acks, **conf) -> None:
    p = producer(node, **{"linger.ms": 20, **conf})
    for v in values:
        p.produce(topic, v, partition=partition_of(v), on_delivery=acks)
        p.poll(0)
    p.flush(60)


def send_transactions(node: KafkaNode, topic: str, committed, aborted, partition: int, acks: Acks):
    """One committed transaction of `committed`, then one aborted of `aborted`
    (the aborted ones stay in the log, followed by an ABORT marker)."""
    p = producer(node, **{"transactional.id": f"segments-{topic}", "linger.ms": 5})
    p.init_transactions(60)
    p.begin_transaction()
    for v in committed:
        p.produce(topic, v, partition=partition, on_delivery=acks)
    p.commit_transaction(60)
    aborted_acks = Acks()
    p.begin_transaction()
    for v in aborted:
        p.produce(topic, v, partition=partition, on_delivery=aborted_acks)
    p.flush(60)
    p.abort_transaction(60)
    return aborted_acks


# -- the committed fixture (tests/data/kafka/) -------------------------------------
FIXTURE_TOPIC = "log"
FIXTURE_CHECKPOINTS = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                       "log-start-offset-checkpoint", "meta.properties")


def write_fixture(out: Path) -> None:
    """A small real log: topic `log`, one partition, 2 KiB segments; 30 single-record
    batches, one gzip batch of 20, a broker restart (leader epoch 0 -> 2), 10
    idempotent sends, a committed and an aborted transaction, and a few odd values
    (a JSON string, plain text, a null value, a record with headers). Writes
    `out/logdir/` (the checkpoints, meta.properties and `log-0/`) and
    `out/dump-log-segments.txt` (Kafka's DumpLogSegments of every segment)."""
    import shutil

    out = Path(out)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"kafka-fixture-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    node = KafkaNode(work)
    acks = Acks()
    one = lambda v: 0  # noqa: E731
    try:
        node.format()
        node.start()
        create_topic(node, FIXTURE_TOPIC, 1, {"internal.segment.bytes": "2048"})
        wait_for_leaders(node, FIXTURE_TOPIC, 1)
        send_one_by_one(node, FIXTURE_TOPIC, [str(i).encode() for i in range(30)], one, acks)
        send_batched(node, FIXTURE_TOPIC, [str(i).encode() for i in range(30, 50)], one, acks,
                     **{"compression.type": "gzip"})
        node.stop()
        node.start()
        wait_for_leaders(node, FIXTURE_TOPIC, 1)
        send_one_by_one(node, FIXTURE_TOPIC, [str(i).encode() for i in range(50, 60)], one, acks,
                        **{"enable.idempotence": True})
        send_transactions(node, FIXTURE_TOPIC, [str(i).encode() for i in range(60, 65)],
                          [str(i).encode() for i in range(65, 70)], 0, acks)
        p = producer(node)
        for value, headers in ((b'"text"', None), (b"plain text", None), (None, None), (b"70", [("h", b"v")])):
            p.produce(FIXTURE_TOPIC, value, key=b"k", partition=0, headers=headers, on_delivery=acks)
            p.flush(30)
        del p  # closed before the broker stops: no reconnect noise
        assert not acks.errors, acks.errors
        node.stop()
        part = node.log_dir / f"{FIXTURE_TOPIC}-0"
        dest = out / "logdir"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in FIXTURE_CHECKPOINTS:
            shutil.copy2(node.log_dir / name, dest / name)
        shutil.copytree(part, dest / part.name)
        segs = sorted((dest / part.name).glob("*.log"))
        text = dump_log_segments(segs).replace(str(dest) + "/", "")
        (out / "dump-log-segments.txt").write_text(text)
    finally:
        node.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]))

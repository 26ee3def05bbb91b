"""harness.sut.LogClient over Apache Kafka with confluent-kafka (librdkafka),
the client most Kafka users run outside the JVM.

Keys are the partitions of one topic `log`; values are the workload's JSON
values as UTF-8 text.

Sends (one send per op; the answer librdkafka gives, classified by what it proves):
- `retries=0` and idempotence off by default. That does not make one send one
  broker answer: librdkafka re-sends a batch whose answer was
  NOT_LEADER_OR_FOLLOWER (and other "refresh" errors) to the new leader without
  counting a retry, taking the batch for not appended
  (rdkafka_request.c, rd_kafka_handle_Produce_error), but a Kafka leader that
  appended the batch and stepped down while it waited for acks=all answers
  exactly that (Partition.checkEnoughReplicasReachOffset, `case None`). So the
  batch may be in the log twice (a duplicate of the client's making), and the
  error the application finally gets (e.g. the new leader's NOT_ENOUGH_REPLICAS)
  says nothing about the first copy. Measured: systems/kafka/campaigns/false-alarms-kafka.yaml
  on 2026-11-27, 4 of 25 runs: docs/findings/kafka.md, "Client re-sends".
- DefiniteError (`fail`): only what librdkafka refused before sending
  (`produce()` raised: queue full, an invalid argument, a partition it does
  not know), and AbsentError (a DefiniteError): the broker says the topic or
  partition does not exist (UNKNOWN_TOPIC_OR_PARTITION); after recovery that
  key's log is gone.
- IndefiniteError (`info`): every other delivery error, whatever the broker
  said last (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
  a local message timeout, ...).
- `idempotent=True`: `enable.idempotence` (acks=all, librdkafka's own retries
  with sequence numbers, so the broker drops the re-sent copy): what Kafka's
  Java producer does by default since 3.0. A fatal idempotence error (e.g. an
  out-of-order sequence after an unclean election) makes that producer unusable:
  the send is `info` and the next send gets a new producer.

Reads: one consumer per client; each key it reads stays assigned, and a poll
takes what the fetches brought (or waits up to 100 ms for one), seeking only
when the caller's position is not where that key's last poll ended (no group,
no commits, so the position lives in the client exactly as with the replica),
reading up to the high watermark (read_uncommitted). A position
past the log end is OFFSET_OUT_OF_RANGE, which the workload treats as a
truncated log. Offsets come from ListOffsets (`end_offset`: the HW).

Metadata (`metadata`) is DescribeTopicPartitions (KIP-966; systems/kafka/describe.py),
the one request that returns the leader epoch and the eligible leader
replicas beside the leader and the ISR. The ZooKeeper-era brokers (0.10.2,
0.11.0, 2.8) have no such request: the Metadata API answers leader, replicas
and ISR (and, from 2.1 on, the leader epoch; before, the epoch is None).

librdkafka is a blocking C library with its own threads: calls run on the
event loop's worker threads, which inherit the client thread's network
namespace (setns is per thread; threads inherit it when they are created).
"""
from __future__ import annotations

import asyncio
import json
import threading
import time

from harness.sut import AbsentError, DefiniteError, IndefiniteError, KeyMeta

TOPIC = "log"
# Per-topic settings (Kafka's names) passed to CreateTopics; the rest are broker settings.
TOPIC_SETTINGS = ("min.insync.replicas", "unclean.leader.election.enable", "segment.bytes",
                  "flush.messages", "flush.ms", "retention.ms", "retention.bytes", "local.retention.ms",
                  "local.retention.bytes", "remote.storage.enable", "segment.ms", "message.timestamp.type")

# librdkafka's refusals before anything was sent (raised by produce()); a delivery
# report's error is never definite (see the module docstring).
DEFINITE = frozenset({"_QUEUE_FULL", "_MSG_SIZE_TOO_LARGE", "_INVALID_ARG", "_UNKNOWN_PARTITION",
                      "_UNKNOWN_TOPIC"})


# A broker's definite answer that the topic or the partition does not exist (harness.sut.AbsentError).
ABSENT = frozenset({"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_ID"})


def node_name(broker_id) -> str | None:
    """Broker id i runs on n<i>; -1 (no leader) is None."""
    return None if broker_id is None or broker_id < 0 else f"n{broker_id}"


def encode(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def decode(raw: bytes | None):
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def error_name(err) -> str:
    """librdkafka's name of a KafkaError (e.g. NOT_ENOUGH_REPLICAS)."""
    try:
        return err.name()
    except Exception:
        return str(err)


def classify(err) -> type[DefiniteError] | type[IndefiniteError]:
    """An error raised by produce() itself: nothing was sent."""
    return DefiniteError if error_name(err) in DEFINITE else IndefiniteError


def classify_delivery(err) -> type[DefiniteError] | type[IndefiniteError]:
    """A delivery report's error: librdkafka may have sent the batch before (to a
    leader that appended it), so only the topic's absence is definite."""
    return AbsentError if error_name(err) in ABSENT else IndefiniteError


def _fatal(err) -> bool:
    try:
        return bool(err.fatal())
    except Exception:  # noqa: BLE001 - not a KafkaError
        return False


def partition_meta(p: dict) -> KeyMeta:
    """KeyMeta from one partition of a DescribeTopicPartitions answer."""
    return KeyMeta(leader=node_name(p.get("leader_id")), epoch=p.get("leader_epoch"),
                   replicas=tuple(node_name(b) for b in p.get("replica_nodes") or ()),
                   isr=tuple(node_name(b) for b in p.get("isr_nodes") or ()), view=p.get("view_from"))


def elr(p: dict) -> tuple[str, ...]:
    return tuple(node_name(b) for b in p.get("eligible_leader_replicas") or ())


class _Poller:
    """Serves one producer's delivery callbacks from a daemon thread (librdkafka
    calls them from inside `poll`)."""

    def __init__(self, producer):
        self.producer = producer
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="kafka-producer-poll")
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.producer.poll(0.05)
            except Exception:  # noqa: BLE001 - a callback's error must not end delivery
                pass


POLL_WAIT_S = 0.1      # a poll with nothing fetched waits this long for a fetch (Jepsen's 100 ms)
FETCHED_AT_ONCE = 10_000
KEPT_RECORDS = 20_000  # records kept for a key not being read; past that it is sought again when read
COORDINATOR_S = 10.0   # the set-up's wait for the reads' group coordinator (KafkaLogClient._find_coordinator)


class _KeptReader:
    """One consumer's reads of several keys, each key assigned once and kept.

    librdkafka fetches every assigned partition ahead of the application and hands
    their messages out of one queue: what a fetch brings for a key other than the
    one being read is kept here, in offset order, with the error that ended it, so
    that key's next poll takes it without a round trip. `next[key]` is the offset
    the key's next record comes from (what the caller's position must be for the
    kept records to be the ones it asks for); a poll from anywhere else seeks.
    """

    def __init__(self, consumer) -> None:
        self.consumer = consumer
        self.next: dict[int, int | None] = {}   # key -> offset its kept records and the fetcher go on from
        self.kept: dict[int, list] = {}         # key -> [(offset, value)] fetched, not yet read
        self.error: dict[int, object] = {}      # key -> the fetch error after its kept records
        self.eof: set[int] = set()              # keys whose fetcher reached the end after the kept records
        self.unanswered: set[int] = set()       # keys positioned since their last fetch answer

    def position(self, key: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        if key not in self.next:
            self.consumer.incremental_assign([TopicPartition(TOPIC, key, offset)])
        elif self.next[key] != offset:   # another position (or after an error): start over there
            self.consumer.seek(TopicPartition(TOPIC, key, offset))
        else:
            return
        self.next[key] = offset
        self.kept[key] = []
        self.error.pop(key, None)
        self.eof.discard(key)
        self.unanswered.add(key)

    def ended(self, key: int) -> bool:
        """Whether key's fetcher reached its end with nothing kept after it."""
        return key in self.eof

    def take(self, key: int, max_records: int) -> list[tuple[int, object]]:
        """Up to max_records kept records of key; raises the key's fetch error when it
        comes first (the next poll seeks: the fetcher stops at an error)."""
        from confluent_kafka import KafkaError

        kept = self.kept[key]
        out, self.kept[key] = kept[:max_records], kept[max_records:]
        if out:
            self.next[key] = out[-1][0] + 1
            if self.kept[key]:
                self.eof.discard(key)
            return out
        err = self.error.pop(key, None)
        if err is None:
            return []
        self.next[key] = None
        self.eof.discard(key)
        if err.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            raise DefiniteError(f"OFFSET_OUT_OF_RANGE: {err.str()}")
        if error_name(err) in ABSENT:
            raise AbsentError(f"UNKNOWN_TOPIC_OR_PARTITION ({error_name(err)}): {err.str()}")
        raise DefiniteError(f"{error_name(err)}: {err.str()}")

    def fetch(self, wait: float) -> None:
        """Keep what the consumer has, for every key: the first message within `wait`
        seconds, then whatever else is already fetched."""
        from confluent_kafka import KafkaError

        if wait:
            first = self.consumer.poll(wait)
            if first is None:
                return
            messages = [first] + self.consumer.consume(num_messages=FETCHED_AT_ONCE, timeout=0)
        else:
            messages = self.consumer.consume(num_messages=FETCHED_AT_ONCE, timeout=0)
        for m in messages:
            k = m.partition()
            if k not in self.next and m.error() is not None and error_name(m.error()) in ABSENT:
                for key in self.next:   # the topic is gone (an error for no one partition): every key's answer
                    if self.next[key] is not None and key not in self.error:
                        self.error[key] = m.error()
                        self.unanswered.discard(key)
                continue
            if k not in self.next or self.next[k] is None or k in self.error:
                continue   # a key sought since, or already in error: the rest of its fetch is stale
            self.unanswered.discard(k)
            err = m.error()
            if err is None:
                kept = self.kept[k]
                if len(kept) < KEPT_RECORDS:
                    kept.append((m.offset(), decode(m.value())))
                    self.eof.discard(k)
                else:   # read nobody is asking for: drop it, and seek when the key is read
                    self.next[k] = None
            elif err.code() == KafkaError._PARTITION_EOF:
                self.eof.add(k)
            else:
                self.error[k] = err


class KafkaLogClient:
    def __init__(self, bootstrap: list[tuple[str, int]], request_timeout: float = 5.0,
                 idempotent: bool = False, topic_config: dict | None = None, zk_version: str | None = None,
                 controller: tuple[str, int] | None = None, broker_ids: list[int] | None = None,
                 names: dict[tuple[str, int], str] | None = None):
        self.names = dict(names or {})     # (host, port) -> node name, for `view_from`
        self.zk_version = zk_version       # a ZooKeeper-era broker version: metadata from the Metadata API
        self.controller = controller       # ZooKeeper era: the controller broker, asked for metadata first
        # The topic's replicas go on these brokers, round-robin (the ZooKeeper era's controller
        # broker is not among them): key k is led by the k-th broker at creation in every
        # variant, so a seed gives the same leaders from run to run (KRaft's own placer
        # starts at a random broker).
        self.broker_ids = broker_ids
        self.topic_config = topic_config   # the DB's split of the run's settings (None: pick TOPIC_SETTINGS)
        self.brokers = list(bootstrap)
        self.bootstrap = ",".join(f"{h}:{p}" for h, p in bootstrap)
        self.request_timeout = request_timeout
        self.idempotent = idempotent
        self._producers: dict[str, tuple[object, _Poller]] = {}
        self._consumer = None
        self._read_lock = asyncio.Lock()
        self._closed = False

    # -- the librdkafka objects, made on first use ---------------------------
    def _producer(self, acks: str):
        if acks not in self._producers:
            from confluent_kafka import Producer

            ms = int(self.request_timeout * 1000)
            conf = {"bootstrap.servers": self.bootstrap, "acks": acks, "linger.ms": 0,
                    "request.timeout.ms": max(1000, ms - 500), "message.timeout.ms": ms,
                    "socket.timeout.ms": ms, "topic.metadata.refresh.interval.ms": 1000,
                    "metadata.max.age.ms": 3000, "reconnect.backoff.max.ms": 500,
                    "log_level": 0}
            if self.idempotent:
                conf.update({"enable.idempotence": True, "acks": "all"})
            else:
                conf.update({"enable.idempotence": False, "retries": 0, "max.in.flight": 1})
            producer = Producer(conf)
            self._producers[acks] = (producer, _Poller(producer))
        return self._producers[acks][0]

    def _retire_producer(self, acks: str) -> None:
        """Forget a producer librdkafka declared unusable (fatal error); it is closed
        on a daemon thread, since its own callbacks are running now."""
        entry = self._producers.pop(acks, None)
        if entry is not None:
            producer, poller = entry
            poller.stop.set()
            threading.Thread(target=lambda: producer.flush(0), daemon=True).start()

    def _consumer_(self, key: int | None = None, offset: int = 0):
        """The client's one consumer; with a key, its reader (`_KeptReader`) positioned
        at offset of that key."""
        if self._consumer is None:
            from confluent_kafka import Consumer

            # The fetchers run between polls: a broker answers a fetch as soon as it has
            # records, and holds an idle one up to fetch.wait.max.ms (so 500 ms, not 100:
            # a tenth of the requests to idle brokers, no later records).
            ms = int(self.request_timeout * 1000)
            self._consumer = Consumer({
                "bootstrap.servers": self.bootstrap, "group.id": "replog-reader", "enable.auto.commit": False,
                "enable.auto.offset.store": False, "auto.offset.reset": "error", "enable.partition.eof": True,
                "fetch.wait.max.ms": 500, "isolation.level": "read_uncommitted", "socket.timeout.ms": ms,
                "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 500, "log_level": 0})
            self._reader = _KeptReader(self._consumer)
        if key is None:
            return self._consumer
        self._reader.position(key, offset)
        return self._reader

    # -- LogClient -------------------------------------------------------------
    async def create(self, keys: int, replication_factor: int, config: dict) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        chosen = self.topic_config if self.topic_config is not None else \
            {k: v for k, v in config.items() if k in TOPIC_SETTINGS}
        topic_config = {k: _text(v) for k, v in chosen.items()}

        def create() -> None:
            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            if self.broker_ids:   # round-robin over the data brokers
                ids = self.broker_ids
                assignment = [[ids[(p + i) % len(ids)] for i in range(replication_factor)] for p in range(keys)]
                new = NewTopic(TOPIC, keys, replica_assignment=assignment,
                               config=topic_config)
            else:
                new = NewTopic(TOPIC, keys, replication_factor, config=topic_config)
            futures = admin.create_topics([new],
                                          request_timeout=self.request_timeout)
            try:
                futures[TOPIC].result(timeout=self.request_timeout + 1)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                    raise DefiniteError(f"create topic: {e}") from None

        await asyncio.to_thread(create)
        await asyncio.to_thread(self._find_coordinator)

    def _find_coordinator(self) -> None:
        """The reads' group coordinator, found once during the set-up (best effort).

        librdkafka's Python consumer must have a group.id, and its first coordinator lookup
        makes the cluster create `__consumer_offsets` (KRaft: 50 partitions x the replication
        factor). At the workload's first poll that took the first 2-3 s of the main phase:
        sends at 0.3-1 s and 20-80 invocations/s of 100 (Kafka 4.1.1, docs/performance.md,
        issue 40). Asking for a committed offset waits for that coordinator."""
        from confluent_kafka import TopicPartition

        deadline = time.monotonic() + COORDINATOR_S
        consumer = self._consumer_()
        while (left := deadline - time.monotonic()) > 0:
            try:
                consumer.committed([TopicPartition(TOPIC, 0)], timeout=max(0.5, left))
                return
            except Exception:  # noqa: BLE001 - not yet (COORDINATOR_NOT_AVAILABLE, a timeout): again
                time.sleep(0.2)

    async def metadata(self) -> dict[int, KeyMeta]:
        return {k: partition_meta(p) for k, p in (await self.describe()).items()}

    async def describe(self) -> dict[int, dict]:
        """The partitions of the topic as DescribeTopicPartitions answers them
        (systems/kafka/describe.py): every broker is asked at once and, per
        partition, the freshest answer is kept (systems/kafka/freshest.py; each
        says whose view it is in `view_from`). A broker cut off from the
        controller keeps answering its own stale view, so the first answer is
        not the one to believe (issue 42)."""
        from systems.kafka.freshest import freshest

        targets = ([self.controller] if self.controller else []) + \
            [b for b in self.brokers if b != self.controller]
        timeout = min(2.0, self.request_timeout)
        tasks = [asyncio.create_task(self._describe_one(host, port, timeout)) for host, port in targets]
        try:
            await self._gather_answers(tasks, timeout)
        finally:
            for t in tasks:
                t.cancel()
        answers, unknown, last = [], None, None
        for (host, port), t in zip(targets, tasks):
            if not t.done() or t.cancelled():
                continue
            e = t.exception()
            if e is None:
                answers.append((self._name(host, port), t.result()))
            elif isinstance(e, LookupError):   # the broker answered: no such topic
                unknown = e
            else:                                # down, paused, cut off, or not ready
                last = e
        if answers:   # a broker whose cache lags (no topic yet) is outvoted by one that knows it
            return freshest(answers, controller=self._name(*self.controller) if self.controller else None)
        if unknown is not None:   # no broker knows the topic
            raise AbsentError(f"UNKNOWN_TOPIC_OR_PARTITION: {unknown}")
        raise IndefiniteError(f"describe: no broker answered ({type(last).__name__}: {last})")

    # Once a majority of the brokers answered, how long the others may take: a
    # paused or cut-off broker would otherwise hold every call for the full timeout.
    # A majority, not the first answer: the stale broker is usually the fastest to
    # answer (it is the one not busy with an election), and on a loaded machine the
    # live brokers may take longer than any fixed grace after it.
    ANSWER_GRACE = 0.2

    async def _gather_answers(self, tasks: list, timeout: float) -> None:
        """Wait until every broker answered, or ANSWER_GRACE after a majority of
        them answered (a topic's view or "no such topic"), or the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        majority = len(tasks) // 2 + 1
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()),
                                               return_when=asyncio.FIRST_COMPLETED)
            if not done:
                return
            answered = sum(1 for t in tasks if t.done() and not t.cancelled()
                           and (t.exception() is None or isinstance(t.exception(), LookupError)))
            if answered >= majority:
                deadline = min(deadline, loop.time() + self.ANSWER_GRACE)

    async def _describe_one(self, host: str, port: int, timeout: float) -> dict[int, dict]:
        from systems.kafka.describe import describe_partitions, metadata_partitions, metadata_version

        if self.zk_version is not None:   # no DescribeTopicPartitions before 3.8: the Metadata API
            return await metadata_partitions(host, port, TOPIC, timeout, metadata_version(self.zk_version))
        return await describe_partitions(host, port, TOPIC, timeout)

    def _name(self, host: str, port: int) -> str:
        return self.names.get((host, port), f"{host}:{port}")

    async def send(self, key: int, value, acks: str = "all") -> int:
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def settle(err, offset) -> None:
            if future.done():
                return
            if err is None:
                future.set_result(offset)
            else:
                if _fatal(err):   # an idempotent producer's fatal error: the next send gets a new one
                    self._retire_producer(acks)
                future.set_exception(classify_delivery(err)(error_name(err)))

        def delivered(err, msg) -> None:
            offset = None if err is not None else msg.offset()
            try:
                loop.call_soon_threadsafe(settle, err, offset)
            except RuntimeError:  # the loop is gone
                pass

        def produce() -> None:
            from confluent_kafka import KafkaException

            try:
                self._producer(acks).produce(TOPIC, value=encode(value), partition=key, on_delivery=delivered)
            except BufferError as e:
                raise DefiniteError(f"_QUEUE_FULL: {e}") from None
            except KafkaException as e:
                err = e.args[0] if e.args else e
                raise classify(err)(error_name(err)) from None

        await asyncio.to_thread(produce)
        offset = await future
        return offset if offset is not None and offset >= 0 else -1   # acks=0: the broker gives no offset

    async def poll(self, key: int, offset: int, max_records: int = 1000) -> list[tuple[int, object]]:
        """What one fetch brings of key from offset: the records already fetched, else
        what arrives within POLL_WAIT_S (Jepsen's clients poll for 100 ms); [] when none.
        After a seek (or the key's first poll) it waits for the first fetch's answer
        (records, the end or an error), up to the request timeout.

        The consumer keeps every key it has read assigned, and its fetchers running,
        so a poll that goes on where the last one of that key ended is served from
        what was prefetched meanwhile; a poll at another offset seeks. Records of other
        keys that a fetch brings are kept for their next poll, and so is their error.
        (Before, each poll re-assigned the consumer and waited for the partition's end
        in 0.2 s steps: polls took 0.4 s at p50 on Kafka 4.1.1.)"""

        def read() -> list[tuple[int, object]]:
            reader = self._consumer_(key, offset)
            out = reader.take(key, max_records)
            if out:
                return out
            if key in reader.unanswered:   # just assigned or sought: the first fetch's answer
                deadline = time.monotonic() + self.request_timeout
                while key in reader.unanswered and time.monotonic() < deadline:
                    reader.fetch(POLL_WAIT_S)
            else:   # at the key's end already: only what was fetched since, without waiting
                reader.fetch(0.0 if reader.ended(key) else POLL_WAIT_S)
            return reader.take(key, max_records)

        async with self._read_lock:
            return await asyncio.to_thread(read)

    async def end_offset(self, key: int) -> int:
        return (await self.watermarks(key))[1]

    async def watermarks(self, key: int) -> tuple[int, int]:
        """(log start, high watermark) of key, as its leader answers ListOffsets
        (earliest, latest); with tiered storage the log start counts the remote tier."""
        from confluent_kafka import TopicPartition

        def watermarks() -> tuple[int, int]:
            from confluent_kafka import KafkaException

            try:
                low, high = self._consumer_().get_watermark_offsets(TopicPartition(TOPIC, key),
                                                                     timeout=self.request_timeout)
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if err is not None and error_name(err) in ABSENT:
                    raise AbsentError(f"UNKNOWN_TOPIC_OR_PARTITION ({error_name(err)}): list offsets") from None
                raise IndefiniteError(f"list offsets: {e}") from None
            except Exception as e:
                raise IndefiniteError(f"list offsets: {e}") from None
            return low, high

        async with self._read_lock:
            return await asyncio.to_thread(watermarks)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        producers, self._producers = list(self._producers.values()), {}
        consumer, self._consumer = self._consumer, None

        def close() -> None:
            for producer, poller in producers:
                poller.stop.set()
                poller.thread.join(1.0)
                try:
                    producer.flush(0)
                except Exception:
                    pass
            if consumer is not None:
                try:
                    consumer.close()
                except Exception:
                    pass

        try:
            await asyncio.wait_for(asyncio.to_thread(close), 5.0)
        except Exception:
            pass


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)

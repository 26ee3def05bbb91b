"""harness.sut.QueueClient over Apache Kafka with confluent-kafka: a transactional
producer and a group consumer per process, the consumed offsets committed inside
the transaction (exactly-once processing as Kafka's users build it; KIP-98, KIP-447).

- Producer: `transactional.id` = the process's name (a new process, a new id, so
  one process never fences another); `transaction.timeout.ms` short, so a
  transaction a retired process left open is aborted by its coordinator within
  seconds and does not hold back the last stable offset. With `txn=false`: an
  idempotent producer, one send per op.
- Consumer: `isolation.level=read_committed`, no auto-commit. Subscribed: a member
  of the run's group; the rebalance callbacks are kept for the history
  (`rebalances`). Assigned: `assign()` of the keys at the group's committed positions
  (a group of the process's own: no member shares its positions).
- A transaction whose consumer lost partitions to a rebalance while it ran is
  aborted (the positions it would commit may belong to another member now): `fail`.
- After a `fail` the consumer seeks back to its committed positions: Kafka does not
  rewind a consumer when its transaction aborts (the position stays past the
  records the aborted transaction read, and they would be skipped).

Outcomes, by what librdkafka says (rd_kafka_error_t's flags):
- an error before `commit_transaction`: the transaction is aborted (abort_transaction)
  and nothing of it is visible: DefiniteError (`fail`); Fenced when the producer is
  fatally broken (fenced, epoch expired): `fail` and the process retires;
- `commit_transaction`: ok; `txn_requires_abort` (the coordinator refused): aborted,
  DefiniteError; retriable (a timeout, the coordinator moved): retried until the
  request timeout, then IndefiniteError (`info`: the commit may have happened);
  fatal: Fenced (`fail`, retire) when the producer was fenced (PRODUCER_FENCED,
  INVALID_PRODUCER_EPOCH), else IndefiniteError (`info`: e.g. INVALID_TXN_STATE
  after a retried EndTxn says nothing about whether the first one committed).

Every blocking librdkafka call of one client runs on the client's own daemon
thread (made from the event loop's thread, so that it and librdkafka's threads are
in the client's network namespace): a consumer is not thread-safe, the loop's
shared pool would serialise ten clients' polls, and a call librdkafka never
returns from must not hold up the harness's exit.

A subscribed consumer is never `close()`d: confluent-kafka calls librdkafka's
assign() from its rebalance callback holding the GIL, and during close() after a
broker was killed that call was seen to block for good (2026-11-28, confluent-kafka
2.16.0: every Python thread of the harness stopped). It is dropped instead
(librdkafka destroys it without a consumer close, off the GIL) and the group
evicts it after `session.timeout.ms`, as it would a crashed client.
"""
from __future__ import annotations

import asyncio
import queue
import threading
import time

from harness.sut import DefiniteError, Fenced, IndefiniteError
from systems.kafka.client import TOPIC, decode, encode, error_name

POLL_S = 0.3            # how long one poll micro-op waits for records
POLL_MAX = 64           # records one poll micro-op takes at most
TXN_TIMEOUT_MS = 10000  # transaction.timeout.ms: an abandoned transaction is aborted after this


# A commit answered with these (fatal) was refused because another producer or the coordinator bumped
# the epoch: `fail` (Jepsen's rule for a fenced producer). Any other fatal error of a commit: `info`.
FENCED = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})


class Aborted(DefiniteError):
    """The transaction was aborted (on purpose, or after an error); `completed`: what it did."""

    def __init__(self, message: str, completed: list | None = None):
        super().__init__(message)
        self.completed = completed


class KafkaQueueClient:
    # librdkafka keeps the producer id and epoch to itself (rd_kafka_pid_t) and confluent-kafka
    # exposes neither: the history has no `producer` for its transactions; the brokers' record
    # batches carry them (segments.iter_batches; the run's `harness dump` of the data files)
    transaction_producer = None

    def __init__(self, bootstrap: list[tuple[str, int]], request_timeout: float, name: str, group: str,
                 txn: bool = True, producer: dict | None = None):
        self.bootstrap = ",".join(f"{h}:{p}" for h, p in bootstrap)
        self.request_timeout = request_timeout
        self.name, self.group, self.txn_mode = name, group, txn
        self.producer_settings = dict(producer or {})   # librdkafka properties over the defaults
        self._worker = _Worker(f"kafka-queue-{name}")
        self._producer = None
        self._initialised = False
        self._consumer = None
        self._subscribed = False
        self._events: list[tuple[str, list[int]]] = []   # rebalance callbacks, for the history
        self._revoked = False                            # a rebalance took partitions during this transaction
        self._closed = False

    # -- the librdkafka objects ------------------------------------------------
    def _common(self) -> dict:
        ms = int(self.request_timeout * 1000)
        return {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": ms,
                "topic.metadata.refresh.interval.ms": 1000, "metadata.max.age.ms": 3000,
                "reconnect.backoff.max.ms": 500, "log_level": 0}

    def _producer_(self):
        if self._producer is None:
            from confluent_kafka import Producer

            ms = int(self.request_timeout * 1000)
            conf = {**self._common(), "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                    "request.timeout.ms": max(1000, ms - 500), "message.timeout.ms": ms}
            if self.txn_mode:
                conf.update({"transactional.id": self.name, "transaction.timeout.ms": TXN_TIMEOUT_MS})
            conf.update(self.producer_settings)
            self._producer = Producer(conf)
        if self.txn_mode and not self._initialised:
            try:
                self._producer.init_transactions(self.request_timeout)
            except Exception as e:   # nothing was sent: the op did not happen
                raise self._before_commit(e, "init_transactions") from None
            self._initialised = True
        return self._producer

    def _consumer_(self):
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer({
                **self._common(), "group.id": self.group, "enable.auto.commit": False,
                "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
                "isolation.level": "read_committed", "enable.partition.eof": False,
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 60000,
                "fetch.wait.max.ms": 100})
        return self._consumer

    async def _call(self, fn, *args):
        return await self._worker.call(fn, *args)

    # -- rebalances ----------------------------------------------------------------
    def _on_assign(self, consumer, partitions) -> None:
        self._events.append(("assign", sorted(p.partition for p in partitions)))

    def _on_revoke(self, consumer, partitions) -> None:
        gone = {p.partition for p in partitions}
        held = sorted(p.partition for p in consumer.assignment() if p.partition not in gone)
        self._revoked = True
        self._events.append(("revoke", held))

    _on_lost = _on_revoke

    def rebalances(self) -> list[tuple[str, list[int]]]:
        events, self._events = self._events, []
        return events

    async def ready(self, timeout: float) -> None:
        """Until a transactional producer initialises and the group coordinator answers:
        Kafka creates __transaction_state (50 partitions) and __consumer_offsets on first
        use, which takes a while on a small machine; the workload's first ops would fail."""
        from confluent_kafka import TopicPartition

        def ready() -> None:
            deadline = time.monotonic() + timeout
            last = None
            while time.monotonic() < deadline:
                try:
                    if self.txn_mode:
                        self._producer_()
                    self._consumer_().committed([TopicPartition(TOPIC, 0)], timeout=self.request_timeout)
                    return
                except Exception as e:   # coordinator not yet loaded, topic being created
                    last = e
                    time.sleep(0.5)
            raise TimeoutError(f"Kafka served no transactions or consumer groups within {timeout:g}s: "
                               f"{_text(last) if last is not None else 'no answer'}")
        await self._call(ready)

    async def subscribe(self, keys: list[int]) -> None:
        def subscribe() -> None:
            self._consumer_().subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                        on_lost=self._on_lost)
            self._subscribed = True
        await self._call(subscribe)

    async def assign(self, keys: list[int]) -> None:
        from confluent_kafka import TopicPartition

        def assign() -> None:
            consumer = self._consumer_()
            parts = [TopicPartition(TOPIC, k) for k in keys]
            try:
                committed = consumer.committed(parts, timeout=self.request_timeout)
            except Exception as e:
                raise DefiniteError(f"committed offsets: {_text(e)}") from None
            consumer.assign([TopicPartition(TOPIC, p.partition, p.offset if p.offset >= 0 else -2)
                             for p in committed])
        await self._call(assign)

    # -- transactions --------------------------------------------------------------
    async def txn(self, mops: list[list], abort: bool = False, abort_after: float | None = None) -> list[list]:
        return await self._call(self._txn, mops, abort, abort_after)

    def _txn(self, mops: list[list], abort: bool, abort_after: float | None = None) -> list[list]:
        """One transaction; abort_after (s): the application waits that long for each send's
        delivery report and, without one, aborts while the send is still in flight."""
        producer = self._producer_()
        self._revoked = False
        done: list[list] = []
        try:
            producer.begin_transaction()
            for mop in mops:
                if mop[0] == "send":
                    done.append(["send", mop[1], [self._send_one(producer, mop[1], mop[2], abort_after), mop[2]]])
                else:
                    done.append(["poll", {k: [[o, v] for o, v in recs] for k, recs in self._poll_one().items()}])
            if self._revoked:
                raise DefiniteError("a rebalance took partitions from this consumer during the transaction")
            offsets = self._positions()
            if offsets:
                producer.send_offsets_to_transaction(offsets, self._consumer.consumer_group_metadata(),
                                                     self.request_timeout)
            if self._revoked:
                raise DefiniteError("a rebalance took partitions from this consumer during the transaction")
        except Exception as e:
            err = self._before_commit(e, "transaction")
            self._abort(producer, err, done)
            self._rewind(done)
            raise Aborted(str(err), done) from None
        if abort:
            self._abort(producer, DefiniteError("aborted on purpose"), done)
            self._rewind(done)
            raise Aborted("aborted on purpose", done)
        self._commit(producer, done)
        return done

    def _send_one(self, producer, key: int, value, abort_after: float | None = None) -> int:
        """Produce one record and wait for its delivery report -> its offset."""
        result: dict = {}
        event = threading.Event()

        def delivered(err, msg) -> None:
            result["err"], result["offset"] = err, (None if err is not None else msg.offset())
            event.set()

        producer.produce(TOPIC, value=encode(value), partition=key, on_delivery=delivered)
        deadline = time.monotonic() + (abort_after or self.request_timeout + 1)
        while not event.is_set():
            if time.monotonic() > deadline:
                if abort_after:
                    raise DefiniteError(f"send: not acknowledged in {abort_after:g} s: the application aborts "
                                        f"the transaction")
                raise IndefiniteError("no delivery report")
            producer.poll(0.05)
        if result["err"] is not None:
            raise _error(result["err"])
        return result["offset"]

    def _poll_one(self) -> dict[int, list[tuple[int, object]]]:
        consumer = self._consumer
        if consumer is None:
            return {}
        out: dict[int, list[tuple[int, object]]] = {}
        for m in consumer.consume(num_messages=POLL_MAX, timeout=POLL_S):
            err = m.error()
            if err is not None:
                from confluent_kafka import KafkaError
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise DefiniteError(f"poll: {error_name(err)}: {err.str()}")
            out.setdefault(m.partition(), []).append((m.offset(), decode(m.value())))
        return out

    def _positions(self) -> list:
        """The consumer's positions of the partitions it holds (those it has one for)."""
        consumer = self._consumer
        if consumer is None:
            return []
        held = consumer.assignment()
        if not held:
            return []
        return [p for p in consumer.position(held) if p.offset >= 0]

    def _before_commit(self, e: BaseException, what: str) -> DefiniteError:
        """An error before the commit was asked for: nothing of the transaction is visible."""
        err = _kafka_error(e)
        if err is not None and _flag(err, "fatal"):
            return Fenced(f"{what}: {error_name(err)} (fatal): {err.str()}")
        if isinstance(e, DefiniteError):
            return e
        return DefiniteError(f"{what}: {error_name(err) if err is not None else type(e).__name__}: "
                             f"{err.str() if err is not None else e}")

    def _abort(self, producer, cause: DefiniteError, done: list) -> None:
        """abort_transaction. A fatally broken producer, or one that cannot abort, cannot
        go on: Fenced (the transaction was never committed, so `fail` still holds)."""
        if isinstance(cause, Fenced):
            raise _with(Fenced(str(cause)), done)
        try:
            producer.abort_transaction(self.request_timeout)
        except Exception as e:
            raise _with(Fenced(f"{cause} (abort failed: {_text(e)})"), done) from None

    def _commit(self, producer, done: list) -> None:
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                producer.commit_transaction(max(0.5, deadline - time.monotonic()))
                return
            except Exception as e:
                err = _kafka_error(e)
                if err is None:
                    raise _with(IndefiniteError(f"commit: {type(e).__name__}: {e}"), done) from None
                if _flag(err, "txn_requires_abort"):
                    cause = DefiniteError(f"commit refused: {error_name(err)}: {err.str()}")
                    self._abort(producer, cause, done)
                    self._rewind(done)
                    raise Aborted(str(cause), done) from None
                if _flag(err, "fatal") and error_name(err) in FENCED:
                    raise _with(Fenced(f"commit: {error_name(err)} (fatal): {err.str()}"), done) from None
                if _flag(err, "fatal"):   # e.g. INVALID_TXN_STATE: the coordinator may have committed it
                    raise _with(IndefiniteError(f"commit: {error_name(err)} (fatal): {err.str()}"), done) from None
                if _flag(err, "retriable") and time.monotonic() < deadline:
                    continue
                raise _with(IndefiniteError(f"commit: {error_name(err)}: {err.str()}"), done) from None

    def _rewind(self, done: list | None = None) -> None:
        """Back to the committed positions of the partitions held (Kafka does not
        rewind a consumer whose transaction aborted)."""
        from confluent_kafka import TopicPartition

        consumer = self._consumer
        if consumer is None:
            return
        try:
            held = consumer.assignment()
            if not held:
                return
            for p in consumer.committed(held, timeout=self.request_timeout):
                consumer.seek(TopicPartition(TOPIC, p.partition, p.offset if p.offset >= 0 else -2))
        except Exception as e:   # the consumer cannot say where it stands: it must not go on
            raise _with(Fenced(f"rewind to the committed positions failed: {_text(e)}"), done or []) from None

    # -- outside transactions (txn=false) -------------------------------------------
    async def send(self, key: int, value) -> int:
        def send() -> int:
            try:
                return self._send_one(self._producer_(), key, value)
            except BufferError as e:
                raise DefiniteError(f"_QUEUE_FULL: {e}") from None
            except Fenced as e:   # an idempotent producer's fatal error: the record may be written
                self._producer = None
                raise IndefiniteError(str(e)) from None
        return await self._call(send)

    async def poll(self) -> dict[int, list[tuple[int, object]]]:
        def poll() -> dict:
            out = self._poll_one()
            offsets = self._positions()
            if offsets:
                try:   # at least once: a commit that fails leaves the records to be read again
                    self._consumer.commit(offsets=offsets, asynchronous=False)
                except Exception:
                    pass
            return out
        return await self._call(poll)

    # -- final reads -----------------------------------------------------------------
    async def committed_reads(self, key: int, offset: int) -> tuple[list[tuple[int, object]], bool]:
        from confluent_kafka import KafkaError, TopicPartition

        def read() -> tuple[list, bool]:
            consumer = self._reader()
            consumer.assign([TopicPartition(TOPIC, key, offset)])
            out: list = []
            deadline = time.monotonic() + self.request_timeout
            while time.monotonic() < deadline:
                for m in consumer.consume(num_messages=1000, timeout=0.2):
                    err = m.error()
                    if err is None:
                        out.append((m.offset(), decode(m.value())))
                    elif err.code() == KafkaError._PARTITION_EOF:
                        return out, True
                    elif out:
                        return out, False
                    else:
                        raise DefiniteError(f"{error_name(err)}: {err.str()}")
            return out, False
        return await self._call(read)

    def _reader(self):
        if getattr(self, "_reader_consumer", None) is None:
            from confluent_kafka import Consumer

            self._reader_consumer = Consumer({
                **self._common(), "group.id": f"{self.group}-final", "enable.auto.commit": False,
                "enable.auto.offset.store": False, "auto.offset.reset": "error",
                "isolation.level": "read_committed", "enable.partition.eof": True, "fetch.wait.max.ms": 100})
        return self._reader_consumer

    async def stable(self, key: int) -> bool:
        """The last stable offset (read_committed ListOffsets) equals the high watermark."""
        from confluent_kafka import Consumer, TopicPartition

        def stable() -> bool:
            lso = self._reader().get_watermark_offsets(TopicPartition(TOPIC, key), timeout=self.request_timeout)[1]
            if getattr(self, "_hw_consumer", None) is None:
                self._hw_consumer = Consumer({**self._common(), "group.id": f"{self.group}-final",
                                              "isolation.level": "read_uncommitted"})
            hw = self._hw_consumer.get_watermark_offsets(TopicPartition(TOPIC, key), timeout=self.request_timeout)[1]
            return lso == hw
        try:
            return await self._call(stable)
        except Exception:
            return False

    async def close(self) -> None:
        """The reader consumers (assigned, no group) are closed; the producer and the
        group consumer are dropped on the client's thread (see the module docstring)."""
        if self._closed:
            return
        self._closed = True
        readers = [o for o in (getattr(self, "_reader_consumer", None), getattr(self, "_hw_consumer", None))
                   if o is not None]
        held = [self._consumer, self._producer]
        self._consumer = self._producer = self._reader_consumer = self._hw_consumer = None

        def close() -> None:
            for consumer in readers:
                try:
                    consumer.close()
                except Exception:
                    pass
            readers.clear()
            held.clear()   # the last references: librdkafka destroys them here, off the GIL

        try:
            await asyncio.wait_for(self._call(close), self.request_timeout + 5)
        except Exception:
            pass
        self._worker.stop()


class _Worker:
    """One daemon thread that runs a client's blocking calls in order."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, daemon=True, name=name).start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, loop, future = job
            try:
                result, error = fn(*args), None
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, e
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:   # the loop is closed: nobody waits
                pass
            del job, fn, args, result, error

    async def call(self, fn, *args):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((fn, args, loop, future))
        return await future

    def stop(self) -> None:
        self._jobs.put(None)


def _settle(future: asyncio.Future, result, error) -> None:
    if future.done():   # cancelled (a timeout): the result is dropped
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _kafka_error(e: BaseException):
    """The KafkaError inside a KafkaException (None for anything else)."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


def _flag(err, name: str) -> bool:
    try:
        return bool(getattr(err, name)())
    except Exception:  # noqa: BLE001 - not a KafkaError
        return False


def _error(err) -> Exception:
    """A delivery report's error inside a transaction (the transaction is then aborted)."""
    if _flag(err, "fatal"):
        return Fenced(f"send: {error_name(err)} (fatal): {err.str()}")
    return IndefiniteError(f"send: {error_name(err)}: {err.str()}")


def _with(e: Exception, done: list) -> Exception:
    """e, carrying the micro-ops the transaction completed (the history's value of its op)."""
    e.completed = done
    return e


def _text(e: BaseException) -> str:
    err = _kafka_error(e)
    return f"{error_name(err)}: {err.str()}" if err is not None else f"{type(e).__name__}: {e}"

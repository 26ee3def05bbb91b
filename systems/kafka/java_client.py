"""harness.sut.LogClient over Kafka's Java client (`--option client=java`): the
client the JVM world runs, beside librdkafka (client.py).

One JVM per run (`ClientJvm`, systems/kafka/java/ReplogKafkaClient.java, built by
java_build.py) serves every client process of the run over its stdin and stdout,
one JSON object a line; each `JavaKafkaClient` is one client id in it, with its
own KafkaProducer (per acks) and KafkaConsumer. What an error proves follows
client.py's rules; the table is in the Java program's header: only what the
producer refused before anything reached its accumulator is `fail`
(DefiniteError), the broker's UNKNOWN_TOPIC_OR_PARTITION is an AbsentError, and
every other send error is `info` (IndefiniteError).

The JVM is started when the topic is created or by the first send, poll or end offset
(it runs in the client thread's network namespace: the event loop's thread spawns it),
and exits when no
client has been open for LINGER_S, when the event loop that started it ends
(its watchdog task is cancelled), when the DB is torn down, or by itself when its
stdin closes (the harness died). A JVM that exits with ops in flight ends each of
them as an IndefiniteError ("info": a send may have been written): the workload
retires those processes; a client whose JVM is gone opens again in a new one on
its next op.

Creating the topic, the metadata (DescribeTopicPartitions) and the inspector's
offsets stay on the admin path of client.py: they are the harness's view of the
cluster, not the client under test.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal

from harness.sut import AbsentError, DefiniteError, IndefiniteError, KeyMeta
from systems.kafka.client import KafkaLogClient, decode, encode

LINGER_S = 30.0         # a JVM with no open client exits after this long (the loop's end stops it at once)
START_TIMEOUT_S = 60.0  # until the JVM answers "ready" (a loaded 2-core machine)
HEAP = "256m"
# Quick to start, one GC thread: the machine also runs the brokers' JVMs.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Djava.awt.headless=true"]
MAIN = "ReplogKafkaClient"


class ClientJvm:
    """The run's one client JVM: requests out, replies matched back by id."""

    def __init__(self, proc: asyncio.subprocess.Process, generation: int):
        self.proc = proc
        self.generation = generation
        self.loop = asyncio.get_running_loop()
        self.pending: dict[int, tuple[asyncio.Future, str]] = {}
        self.open: set[int] = set()
        self.ids = itertools.count(1)
        self.exited: str | None = None   # why it is gone
        self.ready: asyncio.Future = self.loop.create_future()
        self.reader = self.loop.create_task(self._read())
        self.watchdog = self.loop.create_task(self._watch())

    async def _read(self) -> None:
        while True:
            try:
                line = await self.proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError) as e:   # a line past the limit
                line = b""
                self.exited = f"unreadable reply ({e})"
            if not line:
                break
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if reply.get("id") == 0:
                if not self.ready.done():
                    self.ready.set_result(None)
                continue
            waiter = self.pending.pop(reply.get("id"), None)
            if waiter is not None and not waiter[0].done():
                waiter[0].set_result(reply)
        code = await self.proc.wait()
        self._gone(self.exited or f"the client JVM exited (code {code})")

    def _gone(self, why: str) -> None:
        """Every op in flight ends as indefinite (it may have been written)."""
        self.exited = self.exited or why
        if not self.ready.done():
            self.ready.set_exception(IndefiniteError(self.exited))
        pending, self.pending = self.pending, {}
        for future, op in pending.values():
            if not future.done():
                future.set_exception(IndefiniteError(f"{self.exited} with {op} in flight"))
        self.open.clear()

    async def _watch(self) -> None:
        """Ends the JVM once no client has been open for LINGER_S, or when the loop ends
        (this task is cancelled: asyncio.run and the runner's drain cancel what is left)."""
        idle = 0.0
        try:
            while self.exited is None:
                await asyncio.sleep(1.0)
                idle = idle + 1.0 if not self.open and not self.pending else 0.0
                if idle >= LINGER_S:
                    break
        finally:
            await asyncio.shield(self.stop())

    async def stop(self, grace: float = 3.0) -> None:
        """Close stdin (the JVM closes its clients and exits), then SIGKILL after grace."""
        if self.proc.returncode is None:
            try:
                self.proc.stdin.close()
            except Exception:  # noqa: BLE001 - already closed
                pass
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except asyncio.TimeoutError:
                self.kill()
                await self.proc.wait()
        self._gone("the client JVM was stopped")

    def kill(self) -> None:
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    async def call(self, client: int, op: str, args: dict) -> dict:
        if self.exited is not None:
            raise IndefiniteError(f"{self.exited} before {op}")
        rid = next(self.ids)
        future = self.loop.create_future()
        self.pending[rid] = (future, op)
        try:
            self.proc.stdin.write(json.dumps({"id": rid, "client": client, "op": op, "args": args},
                                             separators=(",", ":")).encode() + b"\n")
            await self.proc.stdin.drain()
        except (ConnectionError, RuntimeError, AttributeError) as e:   # the pipe is gone
            self.pending.pop(rid, None)
            raise IndefiniteError(f"the client JVM's stdin is gone ({type(e).__name__}) with {op} in flight") \
                from None
        try:
            return await future
        finally:
            self.pending.pop(rid, None)


class ClientJvms:
    """Per DB: its current JVM (one per event loop), started on demand."""

    def __init__(self, class_path: str, java: str = "java", log_path: str | None = None):
        self.class_path = class_path
        self.java = java
        self.log_path = log_path
        self.current: ClientJvm | None = None
        self.generations = itertools.count(1)
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None   # the starting lock, per loop
        self.clients = itertools.count(1)
        # the transaction protocol each committed transaction's producer used (java_queue.py) -> how many
        self.transaction_protocols: dict[str, int] = {}

    def argv(self) -> list[str]:
        return [self.java, "-Xms64m", f"-Xmx{HEAP}", *JVM_FLAGS, "-cp", self.class_path, MAIN]

    async def get(self) -> ClientJvm:
        loop = asyncio.get_running_loop()
        jvm = self.current
        if jvm is not None and jvm.loop is loop and jvm.exited is None:
            return jvm
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            jvm = self.current
            if jvm is not None and jvm.loop is loop and jvm.exited is None:
                return jvm
            if jvm is not None and jvm.exited is None:   # a JVM of an event loop that ended
                jvm.kill()
            err = open(self.log_path, "ab") if self.log_path else asyncio.subprocess.DEVNULL
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.argv(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                    limit=64 * 1024 * 1024)
            except OSError as e:
                raise DefiniteError(f"could not start the client JVM ({self.java}): {e}") from None
            finally:
                if self.log_path:
                    err.close()
            jvm = ClientJvm(proc, next(self.generations))
            self.current = jvm
            await asyncio.wait_for(asyncio.shield(jvm.ready), START_TIMEOUT_S)
            return jvm

    def pid(self) -> int | None:
        jvm = self.current
        return jvm.proc.pid if jvm is not None and jvm.proc.returncode is None else None

    def kill(self) -> None:
        """The DB's teardown: a JVM still running (its loop gone) is killed."""
        jvm, self.current = self.current, None
        if jvm is not None and jvm.proc.returncode is None:
            jvm.kill()


class JavaKafkaClient:
    """One client process in the run's client JVM (see the module docstring)."""

    def __init__(self, jvms: ClientJvms, admin: KafkaLogClient, request_timeout: float = 5.0,
                 idempotent: bool = False):
        self.jvms = jvms
        self.admin = admin
        self.request_timeout = request_timeout
        self.idempotent = idempotent
        self.cid = next(jvms.clients)
        self._jvm: ClientJvm | None = None
        self._closed = False

    # -- the admin path (the harness's view of the cluster) --------------------
    async def create(self, keys: int, replication_factor: int, config: dict) -> None:
        """The topic (admin path); the run's JVM is started here, during the set-up, so that
        the workload's first ops do not wait for it."""
        await self.admin.create(keys, replication_factor, config)
        warm = JavaKafkaClient(self.jvms, self.admin, self.request_timeout)
        try:   # the JVM's classes loaded, a producer's and a consumer's first metadata fetched
            await warm._call("warm", {})
        except Exception:  # noqa: BLE001 - warming is best effort: the workload's ops say what fails
            pass
        finally:
            warm._closed = True
            await warm._close_in_jvm()

    async def metadata(self) -> dict[int, KeyMeta]:
        return await self.admin.metadata()

    async def describe(self) -> dict[int, dict]:
        return await self.admin.describe()

    # -- the Java client ---------------------------------------------------------
    async def _call(self, op: str, args: dict):
        if self._closed:
            raise DefiniteError(f"{op}: the client is closed")
        jvm = await self.jvms.get()
        if self._jvm is not jvm:   # first use, or the last JVM is gone: open in this one
            bootstrap = self.admin.bootstrap
            opened = await jvm.call(self.cid, "open", {"bootstrap": bootstrap,
                                                       "timeout_ms": int(self.request_timeout * 1000),
                                                       "idempotent": self.idempotent})
            if opened.get("type") != "ok":
                raise DefiniteError(f"open: {opened.get('error')}")
            self._jvm = jvm
            jvm.open.add(self.cid)
        reply = await jvm.call(self.cid, op, args)
        kind = reply.get("type")
        if kind == "ok":
            return reply.get("value")
        error = str(reply.get("error") or "unknown error")
        if kind == "fail":
            raise (AbsentError if reply.get("absent") else DefiniteError)(error)
        raise IndefiniteError(error)

    async def send(self, key: int, value, acks: str = "all") -> int:
        offset = await self._call("send", {"key": key, "value": encode(value).decode(), "acks": str(acks)})
        return offset if isinstance(offset, int) and offset >= 0 else -1

    async def poll(self, key: int, offset: int, max_records: int = 1000) -> list[tuple[int, object]]:
        records = await self._call("poll", {"key": key, "offset": offset, "max": max_records})
        return [(o, decode(v.encode()) if v is not None else None) for o, v in records]

    async def end_offset(self, key: int) -> int:
        return await self._call("end_offset", {"key": key})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._close_in_jvm()
        await self.admin.close()

    async def _close_in_jvm(self) -> None:
        jvm, self._jvm = self._jvm, None
        await close_in_jvm(jvm, self.cid, "close")


async def close_in_jvm(jvm: ClientJvm | None, cid: int, request: str) -> None:
    """Close one client id in its JVM (`request`: that client kind's close), if the JVM
    still runs on this event loop; a JVM that is gone or slow has nothing left to close."""
    if jvm is not None and jvm.exited is None and jvm.loop is asyncio.get_running_loop():
        jvm.open.discard(cid)
        try:
            await asyncio.wait_for(jvm.call(cid, request, {}), 5.0)
        except Exception:  # noqa: BLE001 - the JVM is gone or slow: nothing to close
            pass

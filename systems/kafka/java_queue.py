"""harness.sut.QueueClient over Kafka's Java client (`--option client=java`, the
`queue` workload): one process's transactional (or idempotent) producer and
read_committed consumer, served by the run's client JVM (java_client.py's
ClientJvms) as the "q_*" requests of systems/kafka/java/QueueProcess.java, whose
header has the table of what each error proves (the librdkafka queue client's
rules, queue.py).

The JVM's replies map to the protocol's errors: `fail` -> Aborted (DefiniteError,
with the micro-ops the transaction completed), `fenced` -> Fenced (`fail`, the
process retires), `info` -> IndefiniteError (the commit's outcome is unknown; the
process retires). A JVM that exits with a request in flight ends it as
IndefiniteError (java_client.py). A process whose JVM is gone between two
requests lost its producer and consumer with it (its open transaction, if any,
was in flight and is `info`): its next request is Fenced before anything is
sent (`fail`: nothing happened; the process retires and a new one starts in a
new JVM).
"""
from __future__ import annotations

from harness.sut import DefiniteError, Fenced, IndefiniteError
from systems.kafka.client import decode, encode
from systems.kafka.java_client import ClientJvm, ClientJvms, close_in_jvm
from systems.kafka.queue import Aborted


class JavaQueueClient:
    def __init__(self, jvms: ClientJvms, bootstrap: str, request_timeout: float, name: str, group: str,
                 txn: bool = True, producer: dict | None = None):
        self.jvms = jvms
        self.bootstrap = bootstrap
        self.request_timeout = request_timeout
        self.name, self.group, self.txn_mode = name, group, txn
        self.producer_settings = dict(producer or {})   # kafka-clients properties over the defaults
        self.cid = next(jvms.clients)
        self._jvm: ClientJvm | None = None
        self._events: list[tuple[str, list[int]]] = []
        self._closed = False
        # the last txn's {"id", "epoch", "end_epoch"}: the producer's TransactionManager, read by
        # reflection (QueueProcess.producerIdEpoch); recorded in the history as the txn's `producer`
        self.transaction_producer: dict | None = None

    async def _call(self, op: str, args: dict | None = None) -> dict:
        """The JVM's reply (ok) to one request; raises what its type says."""
        if self._closed:
            raise DefiniteError(f"{op}: the client is closed")
        if self._jvm is not None and self._jvm.exited is not None:
            raise Fenced(f"{op}: this process's client JVM is gone ({self._jvm.exited}): its producer and consumer "
                         f"went with it")
        jvm = await self.jvms.get()
        if self._jvm is None:
            opened = await jvm.call(self.cid, "q_open", {
                "bootstrap": self.bootstrap, "timeout_ms": int(self.request_timeout * 1000), "name": self.name,
                "group": self.group, "txn": self.txn_mode,
                "producer": {k: str(v) for k, v in self.producer_settings.items()}})
            if opened.get("type") != "ok":
                raise DefiniteError(f"open: {opened.get('error')}")
            self._jvm = jvm
            jvm.open.add(self.cid)
        elif self._jvm is not jvm:
            raise Fenced(f"{op}: this process's client JVM is gone: its producer and consumer went with it")
        reply = await jvm.call(self.cid, op, args or {})
        self._events.extend((kind, list(keys)) for kind, keys in reply.get("events") or [])
        kind = reply.get("type")
        if op == "q_txn":
            self.transaction_producer = reply.get("producer")
        if kind == "ok":
            protocol = reply.get("protocol")
            if op == "q_txn" and protocol:   # a commit: the protocol its producer used
                self.jvms.transaction_protocols[protocol] = self.jvms.transaction_protocols.get(protocol, 0) + 1
            return reply
        error = str(reply.get("error") or "unknown error")
        completed = _completed(reply.get("completed")) or None
        e = Aborted(error, completed) if kind == "fail" else Fenced(error) if kind == "fenced" \
            else IndefiniteError(error)
        e.completed = completed
        raise e

    # -- the protocol -------------------------------------------------------------
    def rebalances(self) -> list[tuple[str, list[int]]]:
        events, self._events = self._events, []
        return events

    async def ready(self, timeout: float) -> None:
        try:
            await self._call("q_ready", {"timeout_ms": int(timeout * 1000)})
        except DefiniteError as e:
            raise TimeoutError(str(e)) from None

    async def subscribe(self, keys: list[int]) -> None:
        await self._call("q_subscribe", {"keys": keys})

    async def assign(self, keys: list[int]) -> None:
        await self._call("q_assign", {"keys": keys})

    async def txn(self, mops: list[list], abort: bool = False, abort_after: float | None = None) -> list[list]:
        wire = [["send", m[1], encode(m[2]).decode()] if m[0] == "send" else ["poll"] for m in mops]
        args = {"mops": wire, "abort": abort}
        if abort_after:
            args["abort_after_ms"] = int(abort_after * 1000)
        return _completed((await self._call("q_txn", args))["value"])

    async def send(self, key: int, value) -> int:
        return (await self._call("q_send", {"key": key, "value": encode(value).decode()}))["value"]

    async def poll(self) -> dict[int, list[tuple[int, object]]]:
        return _records((await self._call("q_poll"))["value"])

    async def committed_reads(self, key: int, offset: int) -> tuple[list[tuple[int, object]], bool]:
        value = (await self._call("q_committed_reads", {"key": key, "offset": offset}))["value"]
        return [(o, _decode(v)) for o, v in value["records"]], bool(value["end"])

    async def stable(self, key: int) -> bool:
        try:
            return bool((await self._call("q_stable", {"key": key}))["value"])
        except Exception:  # noqa: BLE001 - not known to be stable
            return False

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        jvm, self._jvm = self._jvm, None
        await close_in_jvm(jvm, self.cid, "q_close")


def _decode(v):
    return decode(v.encode()) if v is not None else None


def _records(polled: dict) -> dict[int, list[tuple[int, object]]]:
    return {int(k): [(o, _decode(v)) for o, v in recs] for k, recs in (polled or {}).items()}


def _completed(done) -> list[list]:
    """The JVM's completed micro-ops, values decoded as librdkafka's client gives them."""
    out = []
    for mop in done or []:
        if mop[0] == "send":
            out.append(["send", mop[1], [mop[2][0], _decode(mop[2][1])]])
        else:
            out.append(["poll", {k: [[o, v] for o, v in recs] for k, recs in _records(mop[1]).items()}])
    return out

"""Asyncio client of the replica cluster (standard library only), as in docs/interfaces.md.

    client = Client(bootstrap=[("127.0.0.1", 9000), ...], request_timeout=5.0)
    await client.create_topic("log", partitions=3, replication_factor=3)
    off = await client.produce("log", 0, 17, acks="all")
    recs, hw = await client.fetch("log", 0, 0)
    await client.close()

Error classification is the point of this module: the history must say
whether a failed ``produce`` may have been applied.

* ``DefiniteError``: the record was certainly not appended: the leader
  answered ``NOT_LEADER_OR_FOLLOWER`` / ``NOT_ENOUGH_REPLICAS`` /
  ``UNKNOWN_TOPIC_OR_PARTITION`` / ``INVALID_REQUEST`` / ``MESSAGE_TOO_LARGE`` /
  ``INVALID_RECORD``, no leader was known, the request could not be framed
  (a NaN value, more than the frame limit), or the connection could not be
  made, so nothing was sent.
* ``IndefiniteError``: it may have been appended: ``REQUEST_TIMED_OUT``,
  ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``, any unknown error code, no answer
  within the timeout, or the connection was lost after the request was written.

A produce is never retried here (the workload records every attempt). Reads
(fetch, list_offsets, metadata, state, dump) are retried, refreshing leader
metadata between attempts, until ``request_timeout`` runs out; a failed read
raises ``DefiniteError`` (a read changes nothing).

One connection per address is shared by all requests (responses are matched
by ``corr``), so many concurrent producers cost one socket per broker.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import sys
from typing import Any, Iterable

from replica import protocol as P
from replica.wire import MAX_FRAME_BYTES, FrameError, FrameProtocol, encode_frame

__all__ = ["Client", "ClientError", "DefiniteError", "IndefiniteError", "NotSent", "NoAnswer", "Address"]

log = logging.getLogger("replica.client")

Address = tuple[str, int]

# Produce errors that the broker returns before appending anything.
DEFINITE_PRODUCE_ERRORS = frozenset({
    P.NOT_LEADER_OR_FOLLOWER, P.NOT_ENOUGH_REPLICAS, P.UNKNOWN_TOPIC_OR_PARTITION,
    P.INVALID_REQUEST, P.UNSUPPORTED_API, P.MESSAGE_TOO_LARGE, P.INVALID_RECORD,
})
# Read errors worth another attempt after a metadata refresh.
RETRIABLE_READ_ERRORS = frozenset({
    P.NOT_LEADER_OR_FOLLOWER, P.UNKNOWN_TOPIC_OR_PARTITION, P.FENCED_LEADER_EPOCH,
    P.UNKNOWN_LEADER_EPOCH, P.REQUEST_TIMED_OUT,
})
_RETRY_BACKOFF = (0.05, 0.1, 0.2, 0.4, 0.5)


class ClientError(Exception):
    """A request that did not succeed; ``code`` is the Kafka error name or a client-side reason."""

    def __init__(self, code: str, message: str = ""):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


class DefiniteError(ClientError):
    """The operation certainly had no effect (a history ``fail``)."""


class IndefiniteError(ClientError):
    """The operation may or may not have taken effect (a history ``info``)."""


class NotSent(DefiniteError):
    """Transport failure before the request left this process (connect failed, connection closed)."""

    def __init__(self, message: str):
        super().__init__("NETWORK_ERROR", message)


class NoAnswer(IndefiniteError):
    """The request was written but no answer came (timeout or connection lost)."""

    def __init__(self, message: str):
        super().__init__("NETWORK_ERROR", message)


class _Connection:
    """One TCP connection carrying many outstanding requests, matched by ``corr``.

    Built on ``wire.FrameProtocol``: answers resolve their futures straight
    from the read callback, and requests made in one loop iteration share a send.
    """

    def __init__(self, address: Address, max_frame_bytes: int):
        self.address = address
        self._pending: dict[int, asyncio.Future] = {}
        self._corr = itertools.count(1)
        self.closed = False
        self.protocol = FrameProtocol(self._on_message, on_close=self._on_close,
                                      on_bad_frame=self._on_bad_frame, max_frame_bytes=max_frame_bytes)

    @classmethod
    async def open(cls, address: Address, timeout: float, max_frame_bytes: int) -> "_Connection":
        conn = cls(address, max_frame_bytes)
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.create_connection(lambda: conn.protocol, address[0], address[1]), timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise NotSent(f"cannot connect to {address[0]}:{address[1]}: {e or type(e).__name__}") from None
        return conn

    def _on_message(self, message: dict) -> None:
        future = self._pending.pop(message.get("corr"), None)
        if future is not None and not future.done():
            future.set_result(message)
        elif message.get("corr") is None:
            log.warning("%s:%s answered an unattributable error: %s", *self.address, message)

    def _on_bad_frame(self, error: FrameError) -> None:
        log.warning("%s:%s sent a bad frame: %s", *self.address, error)
        self.protocol.abort()

    def _on_close(self, reason: BaseException | None) -> None:
        self.closed = True
        reason = reason or ConnectionError("connection closed by peer")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(NoAnswer(f"{self.address[0]}:{self.address[1]}: {reason}"))
        self._pending.clear()

    async def call(self, message: dict, timeout: float) -> dict:
        """Send one request and wait for its answer; raises NoAnswer once the request may have been sent."""
        if self.closed or self.protocol.closed:
            raise NotSent("connection already closed")
        corr = next(self._corr)
        try:
            frame = encode_frame({**message, "corr": corr})
        except FrameError as e:          # e.g. a NaN value: the broker would refuse it too
            raise DefiniteError(P.INVALID_RECORD if message.get("api") == P.PRODUCE else P.INVALID_REQUEST,
                                str(e)) from None
        if len(frame) - 4 > self.protocol.max_frame_bytes:
            raise DefiniteError(P.MESSAGE_TOO_LARGE,
                                f"request of {len(frame) - 4} bytes exceeds the frame limit") from None
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending[corr] = future
        self.protocol.send_frame(frame)
        timer = loop.call_later(timeout, _expire, future, self.address, timeout)
        try:
            return await future
        finally:
            timer.cancel()
            self._pending.pop(corr, None)

    async def close(self) -> None:
        self.protocol.close()
        self.closed = True


def _expire(future: asyncio.Future, address: Address, timeout: float) -> None:
    if not future.done():
        future.set_exception(NoAnswer(f"no answer from {address[0]}:{address[1]} within {timeout:.1f}s"))


class Client:
    """Client of a replica cluster; see the module docstring for error semantics.

    Args:
        bootstrap: addresses of the controller and/or brokers to ask for metadata.
        request_timeout: seconds to wait for one answer; for reads, the budget of all retries.
    """

    def __init__(self, bootstrap: Iterable[Address], request_timeout: float = 5.0,
                 max_frame_bytes: int = MAX_FRAME_BYTES):
        self.bootstrap: list[Address] = [(h, int(p)) for h, p in bootstrap]
        if not self.bootstrap:
            raise ValueError("bootstrap needs at least one (host, port)")
        self.request_timeout = request_timeout
        self.max_frame_bytes = max_frame_bytes
        self._connections: dict[Address, _Connection] = {}
        self._connecting: dict[Address, asyncio.Task] = {}
        self.brokers: dict[int, Address] = {}
        self.controller: Address | None = None
        self._partitions: dict[tuple[str, int], dict] = {}
        self._closed = False

    # ------------------------------------------------------------------ plumbing
    async def _connection(self, address: Address) -> _Connection:
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        task = self._connecting.get(address)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                _Connection.open(address, self.request_timeout, self.max_frame_bytes))
            self._connecting[address] = task
            task.add_done_callback(lambda _t, a=address: self._connecting.pop(a, None))
        conn = await asyncio.shield(task)
        self._connections[address] = conn
        return conn

    async def call(self, address: Address, api: str, timeout: float | None = None, **fields: Any) -> dict:
        """Send one request to an address and return the raw response (any ``error`` included).

        Raises ``NotSent`` (a DefiniteError) or ``NoAnswer`` (an IndefiniteError)
        for transport failures.
        """
        if self._closed:
            raise NotSent("client is closed")
        conn = await self._connection(address)
        return await conn.call({"api": api, **fields}, self.request_timeout if timeout is None else timeout)

    async def _retry_read(self, attempt, what: str):
        """Run ``attempt()`` until it returns, or the request_timeout budget is spent."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.request_timeout
        last: Exception | None = None
        for i in itertools.count():
            try:
                return await attempt(max(0.05, deadline - loop.time()))
            except DefiniteError as e:
                if e.code not in RETRIABLE_READ_ERRORS and e.code not in ("NO_LEADER", "NETWORK_ERROR"):
                    raise
                last = e
            except (NotSent, NoAnswer) as e:
                last = e
            pause = _RETRY_BACKOFF[min(i, len(_RETRY_BACKOFF) - 1)]
            if loop.time() + pause >= deadline:
                break
            await asyncio.sleep(pause)
            await self._refresh_quietly()
        code = getattr(last, "code", "NETWORK_ERROR")
        raise DefiniteError(code, f"{what} failed after retries: {last}")

    async def _refresh_quietly(self) -> None:
        try:
            await self._fetch_metadata(None, self.request_timeout / 4)
        except ClientError:
            pass

    # ------------------------------------------------------------------ metadata
    def _metadata_sources(self) -> list[Address]:
        sources: list[Address] = []
        for address in ([self.controller] if self.controller else []) + self.bootstrap + list(self.brokers.values()):
            if address not in sources:
                sources.append(address)
        return sources

    async def _fetch_metadata(self, topic: str | None, timeout: float) -> dict:
        """Ask the controller first (authoritative), then any bootstrap address or broker."""
        errors = []
        sources = self._metadata_sources()
        per_source = max(1.0, timeout / len(sources))      # a stopped source must not eat the budget
        for address in sources:
            try:
                response = await self.call(address, P.METADATA, timeout=per_source, topic=topic)
            except (NotSent, NoAnswer) as e:
                errors.append(str(e))
                continue
            if response.get("error"):
                errors.append(f"{address[0]}:{address[1]}: {response['error']}")
                continue
            self._absorb_metadata(response)
            return response
        raise DefiniteError("NETWORK_ERROR", "no metadata source answered: " + "; ".join(errors))

    def _absorb_metadata(self, response: dict) -> None:
        for broker_id, address in (response.get("brokers") or {}).items():
            self.brokers[int(broker_id)] = (address[0], int(address[1]))
        if response.get("controller"):
            host, port = response["controller"]
            self.controller = (host, int(port))
        for topic, partitions in (response.get("topics") or {}).items():
            for partition, state in partitions.items():
                self._partitions[(topic, int(partition))] = state

    async def metadata(self, topic: str) -> dict[int, dict]:
        """``{partition: {"leader", "leader_epoch", "isr", "replicas", ...}}`` of a topic (fresh)."""
        async def attempt(timeout):
            response = await self._fetch_metadata(topic, timeout)
            partitions = (response.get("topics") or {}).get(topic)
            if partitions is None:
                raise DefiniteError(P.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} unknown")
            return {int(p): state for p, state in partitions.items()}
        return await self._retry_read(attempt, f"metadata {topic}")

    async def _leader_address(self, topic: str, partition: int, refresh: bool) -> Address:
        state = None if refresh else self._partitions.get((topic, partition))
        if state is None or state.get("leader") is None or state["leader"] not in self.brokers:
            # Half the budget: the request itself must still fit in a caller's request_timeout + 2 s.
            await self._fetch_metadata(topic, self.request_timeout / 2)
            state = self._partitions.get((topic, partition))
        if state is None:
            raise DefiniteError(P.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} is unknown")
        leader = state.get("leader")
        if leader is None or leader not in self.brokers:
            raise DefiniteError("NO_LEADER", f"{topic}-{partition} has no leader")
        return self.brokers[leader]

    def _forget_leader(self, topic: str, partition: int) -> None:
        self._partitions.pop((topic, partition), None)

    async def wait_for_leaders(self, topic: str, timeout: float = 30.0, poll: float = 0.1) -> dict[int, dict]:
        """Poll metadata until every partition of the topic has a leader; returns the metadata."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                meta = await self.metadata(topic)
                if meta and all(s.get("leader") is not None for s in meta.values()):
                    return meta
            except DefiniteError:
                pass
            if loop.time() >= deadline:
                raise DefiniteError("NO_LEADER", f"topic {topic!r} has partitions without a leader after {timeout}s")
            await asyncio.sleep(poll)

    # -------------------------------------------------------------------- admin
    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           config: dict | None = None) -> dict[int, dict]:
        """Create a topic through the controller; returns ``{partition: state}``."""
        fields = dict(topic=topic, partitions=partitions, replication_factor=replication_factor,
                      config=config or {})
        retried = False

        async def attempt(timeout):
            nonlocal retried
            if self.controller is None:
                try:
                    await self._fetch_metadata(None, timeout)
                except DefiniteError:
                    pass
            candidates = [self.controller] if self.controller else list(self.bootstrap)
            last = None
            for address in candidates:
                try:
                    response = await self.call(address, P.CREATE_TOPIC, timeout=timeout, **fields)
                except NotSent:
                    raise
                except NoAnswer:
                    retried = True
                    raise
                error = response.get("error")
                if error == P.UNSUPPORTED_API:     # a broker in the bootstrap list: try the next one
                    last = response
                    continue
                if error == P.TOPIC_ALREADY_EXISTS and retried:
                    return await self.metadata(topic)
                if error:
                    raise DefiniteError(error, response.get("message", ""))
                return {int(p): s for p, s in (response.get("partitions") or {}).items()}
            raise DefiniteError(P.UNSUPPORTED_API, f"no controller among {candidates}: {last}")

        return await self._retry_read(attempt, f"create topic {topic}")

    # ------------------------------------------------------------------ produce
    async def produce(self, topic: str, partition: int, value: Any, acks: int | str = "all") -> int:
        """Append one record; returns its offset. Never retried (see the module docstring)."""
        return await self.produce_many(topic, partition, [value], acks)

    async def produce_many(self, topic: str, partition: int, values: list, acks: int | str = "all") -> int:
        """Append records in one request; returns the offset of the first (-1 for acks=0)."""
        if acks not in (0, 1, -1, "all"):
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        address = await self._leader_address(topic, partition, refresh=False)   # DefiniteError: nothing sent
        timeout_ms = int(self.request_timeout * 1000)
        try:
            response = await self.call(address, P.PRODUCE, timeout=self.request_timeout + 1.0,
                                       topic=topic, partition=partition, acks=acks, values=list(values),
                                       timeout_ms=timeout_ms)
        except (NotSent, NoAnswer):            # definite / indefinite respectively
            self._forget_leader(topic, partition)
            raise
        error = response.get("error")
        if error is None:
            return response["offset"]
        if error in (P.NOT_LEADER_OR_FOLLOWER, P.UNKNOWN_TOPIC_OR_PARTITION):
            self._forget_leader(topic, partition)
        if error in DEFINITE_PRODUCE_ERRORS:
            raise DefiniteError(error, response.get("message", ""))
        raise IndefiniteError(error, response.get("message", ""))

    # -------------------------------------------------------------------- reads
    async def fetch(self, topic: str, partition: int, offset: int, max_records: int = 1000,
                    max_wait_ms: int = 0, max_bytes: int | None = None) -> tuple[list[tuple[int, Any]], int]:
        """Records ``[(offset, value)]`` from ``offset`` up to the leader's HW, and that HW
        (at most ``max_bytes`` of them, but at least one; default: the broker's bound)."""
        extra = {} if max_bytes is None else {"max_bytes": max_bytes}
        async def attempt(timeout):
            refresh = attempt.tried
            attempt.tried = True
            address = await self._leader_address(topic, partition, refresh=refresh)
            response = await self.call(address, P.FETCH, timeout=timeout + max_wait_ms / 1000,
                                       topic=topic, partition=partition, offset=offset,
                                       replica_id=P.CONSUMER_REPLICA_ID, max_records=max_records,
                                       max_wait_ms=max_wait_ms, **extra)
            error = response.get("error")
            if error:
                if error in RETRIABLE_READ_ERRORS:
                    self._forget_leader(topic, partition)
                raise DefiniteError(error, response.get("message", ""))
            return [(r[0], r[3]) for r in response.get("records", [])], response["hw"]
        attempt.tried = False
        return await self._retry_read(attempt, f"fetch {topic}-{partition}@{offset}")

    async def list_offsets(self, topic: str, partition: int, spec: str = "latest") -> int:
        """``"earliest"`` = log start, ``"latest"`` = HW of the partition's leader."""
        if spec not in ("earliest", "latest"):
            raise ValueError(f"spec must be 'earliest' or 'latest', not {spec!r}")

        async def attempt(timeout):
            refresh = attempt.tried
            attempt.tried = True
            address = await self._leader_address(topic, partition, refresh=refresh)
            response = await self.call(address, P.LIST_OFFSETS, timeout=timeout,
                                       topic=topic, partition=partition, spec=spec)
            if response.get("error"):
                if response["error"] in RETRIABLE_READ_ERRORS:
                    self._forget_leader(topic, partition)
                raise DefiniteError(response["error"], response.get("message", ""))
            return response["offset"]
        attempt.tried = False
        return await self._retry_read(attempt, f"list_offsets {topic}-{partition}")

    async def broker_address(self, broker_id: int) -> Address:
        if broker_id not in self.brokers:
            await self._refresh_quietly()
        if broker_id not in self.brokers:
            raise DefiniteError("UNKNOWN_BROKER", f"broker {broker_id} is not in the metadata")
        return self.brokers[broker_id]

    async def _debug(self, broker_id: int, api: str) -> dict:
        async def attempt(timeout):
            response = await self.call(await self.broker_address(broker_id), api, timeout=timeout)
            if response.get("error"):
                raise DefiniteError(response["error"], response.get("message", ""))
            return response
        return await self._retry_read(attempt, f"{api} of broker {broker_id}")

    async def state(self, broker_id: int) -> dict:
        """The debug ``State`` of one broker (see docs/interfaces.md)."""
        return await self._debug(broker_id, P.STATE)

    async def dump(self, broker_id: int) -> dict:
        """The debug ``Dump`` (every local record) of one broker."""
        return await self._debug(broker_id, P.DUMP)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        conns, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


# ---------------------------------------------------------------------- CLI
def _address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


async def _cli(args: argparse.Namespace) -> Any:
    async with Client(args.bootstrap, request_timeout=args.timeout) as client:
        if args.command == "metadata":
            return await client.metadata(args.topic)
        if args.command == "create":
            return await client.create_topic(args.topic, args.partitions, args.replication_factor)
        if args.command == "produce":
            return await client.produce(args.topic, args.partition, json.loads(args.value), acks=args.acks)
        if args.command == "fetch":
            return await client.fetch(args.topic, args.partition, args.offset)
        if args.command in ("state", "dump"):
            return await getattr(client, args.command)(args.broker)


def main(argv: list[str] | None = None) -> int:
    """``python3 -m replica.client --bootstrap HOST:PORT COMMAND ...``: poke a cluster by hand."""
    parser = argparse.ArgumentParser(prog="python3 -m replica.client", description=main.__doc__)
    parser.add_argument("--bootstrap", type=_address, action="append", required=True)
    parser.add_argument("--timeout", type=float, default=5.0)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("metadata").add_argument("topic")
    create = sub.add_parser("create")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    produce = sub.add_parser("produce")
    produce.add_argument("topic")
    produce.add_argument("partition", type=int)
    produce.add_argument("value", help="a JSON value")
    produce.add_argument("--acks", default="all", type=lambda a: a if a == "all" else int(a))
    fetch = sub.add_parser("fetch")
    fetch.add_argument("topic")
    fetch.add_argument("partition", type=int)
    fetch.add_argument("offset", type=int, nargs="?", default=0)
    for name in ("state", "dump"):
        sub.add_parser(name).add_argument("broker", type=int)
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(_cli(args))
    except ClientError as e:
        print(f"error: {type(e).__name__} {e}", file=sys.stderr)
        return 1 if isinstance(e, DefiniteError) else 2
    print(json.dumps(result, default=list, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

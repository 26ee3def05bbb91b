"""harness.sut.LogClient over JetStream with nats-py (the client's own API,
no hand-written protocol).

Keys: key k is stream `log-<k>` with the one subject `log.<k>`. A send is a
JetStream publish; its acknowledgement carries the stream sequence, and
offset = sequence - 1, so histories look like the replica's.

Reads are stateless "get message" requests (`STREAM.MSG.GET` with
`next_by_subj`), one per record, from the position the caller keeps:
- they are answered by the stream leader from its store (what the Raft group
  has committed and applied), like a Kafka fetch from the partition leader;
- the position lives in the client exactly as with the replica, so a gap or a
  step back in the offsets is the stream's doing, not a consumer's: an ordered
  consumer silently re-creates itself on a gap, and a pull consumer is
  server-side state (created through the meta leader, acknowledged,
  redelivered) whose bookkeeping would sit between the stream and the history;
- `next_by_subj` returns the first message at or after a sequence, so a hole
  in the stream shows up as an offset jump (the checkers' poll-skip /
  lost-write), and "no message" means the end of the stream.
`allow_direct` gets are not used: any replica may answer them, including one
that is behind, which would blur which copy a read came from.

Errors (the history's fail / info):
- DefiniteError (`fail`): the publish never left the client (no connection,
  connection closed, outbound buffer full), nobody subscribed to the subject
  (no responders: no stream leader took it), or the server answered with an
  error (the stream refuses a message before proposing it; a success
  acknowledgement is only sent after the Raft commit);
- IndefiniteError (`info`): a timeout or a connection lost after the publish
  was handed to the connection; anything unexpected.
- AbsentError (a DefiniteError): a read or stream info answered "stream not
  found" (JetStream error 10059): the server that answers API requests for
  the stream (the meta leader) has no such stream, the definite answer the
  final phase takes as a lost log once the cluster is healthy.
"""
from __future__ import annotations

import asyncio
import json

import nats
import nats.errors
import nats.js.errors
from nats.js.api import StorageType, StreamConfig

from harness.sut import AbsentError, DefiniteError, IndefiniteError, KeyMeta

STREAM_PREFIX = "log-"
WINDOW = 32  # gets in flight per poll
SUBJECT_PREFIX = "log."
STREAM_NOT_FOUND = 10059  # JetStream's definite "no such stream" (JSStreamNotFoundErr)

# Raised before the message reached any server: certainly not stored.
NOT_SENT = (nats.errors.ConnectionClosedError, nats.errors.OutboundBufferLimitError,
            nats.errors.NoServersError, nats.errors.ConnectionDrainingError, nats.errors.BadSubjectError,
            nats.errors.MaxPayloadError, nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError)


def stream_name(key: int) -> str:
    return f"{STREAM_PREFIX}{key}"


def subject(key: int) -> str:
    return f"{SUBJECT_PREFIX}{key}"


def key_of(stream: str) -> int | None:
    if stream.startswith(STREAM_PREFIX) and stream[len(STREAM_PREFIX):].isdigit():
        return int(stream[len(STREAM_PREFIX):])
    return None


def key_meta(cluster) -> KeyMeta:
    """KeyMeta from a stream info's cluster block (nats.js.api.ClusterInfo or
    the monitoring endpoint's dict): the leader and the peers it calls current."""
    if cluster is None:
        return KeyMeta(leader=None)
    if isinstance(cluster, dict):
        leader = cluster.get("leader") or None
        peers = [(p.get("name"), bool(p.get("current"))) for p in cluster.get("replicas") or ()]
    else:
        leader = cluster.leader or None
        peers = [(p.name, bool(p.current)) for p in cluster.replicas or ()]
    replicas = sorted({*(n for n, _ in peers if n), *([leader] if leader else [])})
    isr = sorted({*(n for n, cur in peers if n and cur), *([leader] if leader else [])})
    return KeyMeta(leader=leader, epoch=None, replicas=tuple(replicas), isr=tuple(isr))


def _text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


async def _quiet(e):  # nats-py logs every reconnect attempt otherwise
    return None


class NatsLogClient:
    """One NATS connection (to any node; it reconnects to another one when
    its server dies or stops answering pings), opened on first use."""

    def __init__(self, servers: list[str], request_timeout: float = 5.0, storage: str = "file",
                 connect_timeout: float = 2.0, in_order: bool = False):
        self.servers = servers
        self.in_order = in_order  # try servers in the given order (not nats-py's random pick)
        self.request_timeout = request_timeout
        self.storage = storage
        self.connect_timeout = connect_timeout
        self.nc = None
        self.js = None
        self.reads = None

    async def _connect(self):
        if self.nc is not None and not self.nc.is_closed:
            return self.js
        try:
            self.nc = await nats.connect(
                servers=self.servers, dont_randomize=self.in_order,
                connect_timeout=self.connect_timeout, allow_reconnect=True,
                max_reconnect_attempts=-1, reconnect_time_wait=0.25, ping_interval=1, max_outstanding_pings=2,
                error_cb=_quiet, disconnected_cb=_quiet_cb, reconnected_cb=_quiet_cb, closed_cb=_quiet_cb)
        except Exception as e:  # nothing was sent
            raise DefiniteError(f"cannot connect to any of {', '.join(self.servers)}: {_text(e)}") from e
        self.js = self.nc.jetstream(timeout=self.request_timeout)  # a JetStreamManager too
        # Gets of one poll: a poll of two keys stays within the workload's
        # request timeout even when a stream has no leader to answer.
        self.reads = self.nc.jetstream(timeout=self.request_timeout / 4)
        return self.js

    # -- the log ------------------------------------------------------------
    async def create(self, keys: int, replication_factor: int, config: dict | None = None) -> None:
        """One stream per key; an identical stream that exists is fine."""
        js = await self._connect()
        storage = StorageType.MEMORY if (config or {}).get("storage", self.storage) == "memory" else StorageType.FILE
        for key in range(keys):
            cfg = StreamConfig(name=stream_name(key), subjects=[subject(key)], num_replicas=replication_factor,
                               storage=storage)
            try:
                await js.add_stream(cfg)
            except nats.js.errors.BadRequestError as e:
                if e.err_code == 10058:  # name in use with another configuration
                    raise DefiniteError(f"stream {stream_name(key)} exists with another configuration: {e}") from e
                raise DefiniteError(_text(e)) from e
            except nats.js.errors.APIError as e:
                raise DefiniteError(_text(e)) from e
            except (asyncio.TimeoutError, nats.errors.Error) as e:
                raise IndefiniteError(_text(e)) from e

    async def stream_info(self, key: int):
        js = await self._connect()
        return await js.stream_info(stream_name(key))

    async def metadata(self) -> dict[int, KeyMeta]:
        """Every stream's leader and current peers, as its leader reports them."""
        js = await self._connect()
        out: dict[int, KeyMeta] = {}
        for info in await js.streams_info():
            key = key_of(info.config.name)
            if key is not None:
                out[key] = key_meta(info.cluster)
        return out

    async def send(self, key: int, value, acks: str = "all") -> int:
        """Publish and wait for the acknowledgement; -> sequence - 1.
        (JetStream has no acks=0/1: every acknowledgement follows the Raft commit.)"""
        js = await self._connect()
        payload = json.dumps(value, separators=(",", ":")).encode()
        try:
            ack = await js.publish(subject(key), payload, timeout=self.request_timeout, stream=stream_name(key))
        except NOT_SENT as e:
            raise DefiniteError(_text(e)) from e
        except nats.js.errors.APIError as e:  # the stream answered: not stored
            raise DefiniteError(_text(e)) from e
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, lost connection, anything else: unknown
            raise IndefiniteError(_text(e)) from e
        return ack.seq - 1

    async def poll(self, key: int, offset: int, max_records: int = 1000) -> list[tuple[int, object]]:
        """Records of key from offset on, in stream order, from the leader.

        Gets go out WINDOW at a time (next_by_subj from each of the next WINDOW
        sequences); a window's answers are kept up to the first one that is
        not the next sequence (a hole, or the end), so the next request starts
        right there and reports the jump itself. A poll stops early after a
        quarter of the request timeout (a shorter answer is a valid poll)."""
        await self._connect()
        js = self.reads
        out: list[tuple[int, object]] = []
        seq = offset + 1
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + self.request_timeout / 4
        while len(out) < max_records and loop.time() < stop_at:
            width = 1 if not out else min(WINDOW, max_records - len(out))
            answers = await asyncio.gather(*(self._get_next(js, key, seq + i) for i in range(width)))
            first = answers[0]
            if first is None:
                break  # nothing at or after seq: the end
            out.append(first)
            seq = first[0] + 2
            for got in answers[1:]:
                if got is None or got[0] != seq - 1:
                    break
                out.append(got)
                seq += 1
        return out[:max_records]

    async def _get_next(self, js, key: int, seq: int) -> tuple[int, object] | None:
        """The first record at or after sequence seq, as (offset, value); None at the end."""
        try:
            msg = await js.get_msg(stream_name(key), seq=seq, subject=subject(key), next=True)
        except nats.js.errors.NotFoundError as e:
            if e.err_code == 10037:  # no message at or after seq
                return None
            if e.err_code == STREAM_NOT_FOUND:
                raise AbsentError(_text(e)) from e
            raise DefiniteError(_text(e)) from e
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a read changes nothing
            raise DefiniteError(_text(e)) from e
        return msg.seq - 1, json.loads(msg.data)

    async def end_offset(self, key: int) -> int:
        """One past the last offset the stream leader holds (= last sequence)."""
        try:
            info = await self.stream_info(key)
        except (DefiniteError, IndefiniteError):
            raise
        except nats.js.errors.NotFoundError as e:
            if e.err_code == STREAM_NOT_FOUND:
                raise AbsentError(_text(e)) from e
            raise DefiniteError(_text(e)) from e
        except Exception as e:
            raise DefiniteError(_text(e)) from e
        return info.state.last_seq

    async def close(self) -> None:
        """Close the connection, giving up after 2 s. Not wait_for: on a timeout it
        cancels nats-py's close() and then waits for it, and a close() stuck on a
        server that was paused mid-write can ignore that cancel, which hung a
        run's end for good (the scenario's epoch watcher closes its client while
        it is being cancelled). The close runs as a task of its own; one that
        has not finished in 2 s is cancelled and left behind."""
        nc, self.nc = self.nc, None
        if nc is None:
            return
        task = asyncio.ensure_future(nc.close())
        try:
            done, _ = await asyncio.wait({task}, timeout=2.0)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.cancel()
        elif not task.cancelled():
            task.exception()  # retrieved: a failed close is no error of the caller's


async def _quiet_cb():
    return None

"""The broker core: every partition replica of one broker as a pure state machine.

Inputs (each takes the current time ``now`` in integer ms and returns a list of
actions from ``replica.core.actions``):

- ``start(now, recovered)``: the process started; ``recovered`` maps
  ``(topic, partition)`` to what the shell read from disk:
  ``{"records": [(offset, epoch, crc, value), ...], "hw": int | None,
  "epoch_cache": [(epoch, start), ...], "log_start": int}``.
- ``on_request(conn, message, now)``: a request arrived on connection ``conn``
  (clients, followers' fetches, the controller's pushes); answers are ``Reply``.
- ``on_response(peer, message, now)``: the answer to one of our ``Send`` requests.
- ``on_peer_failed(peer, now)``: the connection to a peer broke; outstanding
  requests to it fail at once instead of timing out.
- ``on_connection_closed(conn, now)``: a client went away; its parked requests are dropped.
- ``on_timer(now)``: the time asked for by the last ``SetTimer`` has come.

The protocol generations (``era``) differ in the rules of ``replica.core.eras``
(one row per era), which ``self.rules`` holds: the epoch cache, how a follower
finds its truncation point (``_become_follower``, ``_on_epoch_response``),
epoch fencing, the epoch a new leader assigns, and ISR expansion.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from .. import config as cfg
from .. import protocol as P
from .actions import (CONTROLLER, REMOTE_STORE, Append, Exit, Flush, Log, Reply, Send, SetTimer, Truncate,
                      WriteEpochCheckpoint, WriteOffsetCheckpoint)
from .epoch_cache import UNDEFINED, EpochCache
from .eras import EpochLookup, rules
from .partition import FetchState, Partition, RemoteReplica
from .tiered import TIERED_APIS, TieredStorage
from .validate import BadRequest, dispatch_request, from_cluster, get_int, get_str

HW_CHECKPOINT = "replication-offset-checkpoint"


@dataclass
class _Pending:
    """One of our requests to a peer, waiting for its answer."""
    corr: int
    dest: Any
    api: str
    ctx: Any
    deadline: int


@dataclass
class _ParkedFetch:
    conn: Any
    corr: Any
    offset: int
    replica_id: int
    max_records: int
    deadline: int
    done: bool = field(default=False, compare=False)   # left its parked list (see _deadlines)
    max_bytes: int | None = None


@dataclass
class _ParkedProduce:
    conn: Any
    corr: Any
    first: int
    last: int
    deadline: int
    done: bool = field(default=False, compare=False)


class BrokerCore:
    def __init__(self, broker_id: int, era: str, config: dict, host: str = "127.0.0.1",
                 port: int = 0, controller_address: list | None = None, cluster_secret: str | None = None):
        self.rules = rules(era)          # ValueError for an unknown era
        self.id = broker_id
        self.era = era
        self.config = dict(config)
        self.host, self.port = host, port
        self.controller_address = controller_address
        self.cluster_secret = cluster_secret   # carried by our requests, asked of followers and the controller
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.metadata: dict[tuple[str, int], dict] = {}
        self.brokers: dict[str, list] = {}
        self.broker_epoch: int | None = None
        self.applied_seq = 0
        self._registering = False
        self._corr = 0
        self._pending: dict[int, _Pending] = {}
        self._fetches: dict[tuple[str, int], list[_ParkedFetch]] = {}
        self._produces: dict[tuple[str, int], list[_ParkedProduce]] = {}
        # Deadlines of parked produces and fetches as a heap of (deadline, seq, entry);
        # entries that left their list are marked done and dropped lazily, so
        # finding the next wake-up does not scan every parked request per input.
        self._deadlines: list = []
        self._park_seq = 0
        self._periodic: dict[str, int] = {}
        self._isr_changes: set = set()
        self._last_isr_change = 0
        self._last_isr_propagation = 0
        self._timer_at: int | None = None
        self._last_isr_check: int | None = None
        self._out: list = []
        self.tiered = TieredStorage(self)   # segments, retention, KIP-405 (replica/core/tiered.py)
        self._handlers = {
            P.PRODUCE: self._on_produce, P.FETCH: self._on_fetch,
            P.LIST_OFFSETS: self._on_list_offsets, P.METADATA: self._on_metadata,
            P.OFFSETS_FOR_LEADER_EPOCH: self._on_offsets_for_leader_epoch,
            P.LEADER_AND_ISR: self._on_leader_and_isr, P.UPDATE_METADATA: self._on_leader_and_isr,
            P.STATE: self._on_state, P.DUMP: self._on_dump,
        }
        c = self.config
        self.lag_ms = c["replica.lag.time.max.ms"]
        self.wait_ms = c["replica.fetch.wait.max.ms"]
        self.backoff_ms = c["replica.fetch.backoff.ms"]
        self.socket_ms = c["replica.socket.timeout.ms"]

    # ------------------------------------------------------------------ inputs
    def start(self, now: int, recovered: dict | None = None) -> list:
        for (topic, partition), disk in (recovered or {}).items():
            p = Partition(topic, partition)
            p.records = [tuple(r) for r in disk.get("records", [])]
            p.max_record_bytes = max((P.record_size(r[3]) for r in p.records), default=0)
            p.config = cfg.topic_config(self.config, disk.get("config"))
            self.tiered.recover_segments(p, disk, now)
            hw = disk.get("hw")
            p.hw = min(max(hw if hw is not None else p.local_start, p.local_start), p.leo)
            p.flushed_to = p.leo
            if self.rules.epoch_cache:
                p.epoch_cache = EpochCache(disk.get("epoch_cache", []))
                p.epoch_cache.truncate_from_end(p.leo + 1)
            self.partitions[p.key] = p
            self._log(f"recovered {topic}-{partition}: leo={p.leo} hw={p.hw} "
                      f"epochs={p.epoch_cache.as_list()}")
        c = self.config
        self._periodic = {
            "heartbeat": now,
            "isr-expiration": now + max(1, self.lag_ms // 2),
            "hw-checkpoint": now + c["replica.high.watermark.checkpoint.interval.ms"],
            "isr-propagation": now + c["isr.change.propagation.interval.ms"],
            "retention": now + c["log.retention.check.interval.ms"],
            "rlm": now + c["remote.log.manager.task.interval.ms"],
        }
        if c["flush.ms"] < cfg.NEVER:
            self._periodic["flush"] = now + min(c["flush.ms"], 1000)
        self._last_isr_propagation = now
        self._run_periodic(now)
        return self._finish(now)

    def on_request(self, conn: Any, message: dict, now: int) -> list:
        dispatch_request(self._handlers, self._reply, conn, message, now)
        return self._finish(now)

    def on_response(self, peer: Any, message: dict, now: int) -> list:
        corr = message.get("corr") if isinstance(message, dict) else None
        pending = self._pending.pop(corr, None) if isinstance(corr, int) else None
        if pending is not None:
            try:
                self._dispatch_response(pending, message, now)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError, BadRequest) as e:
                self._log(f"malformed {pending.api} response from {peer}: {type(e).__name__}: {e}")
                self._dispatch_response(pending, {"corr": corr, "error": P.NETWORK_ERROR}, now)
        return self._finish(now)

    def on_peer_failed(self, peer: Any, now: int) -> list:
        for pending in [p for p in self._pending.values() if p.dest == peer]:
            del self._pending[pending.corr]
            self._dispatch_response(pending, {"corr": pending.corr, "error": P.NETWORK_ERROR}, now)
        return self._finish(now)

    def on_connection_closed(self, conn: Any, now: int) -> list:
        for table in (self._fetches, self._produces):
            for key, parked in table.items():
                kept = []
                for x in parked:
                    if x.conn != conn:
                        kept.append(x)
                    else:
                        x.done = True
                table[key] = kept
        return self._finish(now)

    def on_timer(self, now: int) -> list:
        self._timer_at = None
        self._run_periodic(now)
        for pending in [p for p in self._pending.values() if p.deadline <= now]:
            del self._pending[pending.corr]
            self._dispatch_response(pending, {"corr": pending.corr, "error": P.NETWORK_ERROR}, now)
        for key, parked in list(self._produces.items()):
            for x in [x for x in parked if x.deadline <= now]:
                parked.remove(x)
                x.done = True
                self._reply(x.conn, x.corr, P.REQUEST_TIMED_OUT, offset=x.first, last_offset=x.last)
        for key, parked in list(self._fetches.items()):
            p = self.partitions.get(key)
            for x in [x for x in parked if x.deadline <= now]:
                parked.remove(x)
                x.done = True
                self._answer_fetch(p, x.conn, x.corr, x.offset, x.replica_id, x.max_records, x.max_bytes)
        for p in self.partitions.values():
            if p.retry_at is not None and p.retry_at <= now:
                p.retry_at = None
                self._follower_next(p, now)
            if p.pending_isr_retry_at is not None and p.pending_isr_retry_at <= now:
                p.pending_isr_retry_at = None
                if p.role == "leader" and p.pending_isr is not None:
                    self._send_alter_isr(p, now)
        return self._finish(now)

    def shutdown(self, now: int) -> list:
        """Clean shutdown (SIGTERM), as Kafka's: flush every log and checkpoint the HWs."""
        for p in self.partitions.values():
            if p.flushed_to < p.leo:
                self._flush(p)
        self._checkpoint_hw()
        out, self._out = self._out, []
        return out

    # --------------------------------------------------------------- queries
    def state(self) -> dict:
        return {"broker": self.id, "era": self.era,
                "partitions": [self.partitions[k].state() for k in sorted(self.partitions)]}

    def dump(self) -> dict:
        return {"broker": self.id,
                "partitions": [self.partitions[k].dump() for k in sorted(self.partitions)]}

    # ---------------------------------------------------------------- output
    def _finish(self, now: int) -> list:
        wake = self._next_wake()
        if wake is not None and wake != self._timer_at:
            self._timer_at = wake
            self._out.append(SetTimer(max(wake, now)))
        out, self._out = self._out, []
        return out

    def _next_wake(self) -> int | None:
        times = list(self._periodic.values())
        times.extend(p.deadline for p in self._pending.values())
        heap = self._deadlines
        while heap and heap[0][2].done:
            heapq.heappop(heap)
        if heap:
            times.append(heap[0][0])
        for p in self.partitions.values():
            if p.retry_at is not None:
                times.append(p.retry_at)
            if p.pending_isr_retry_at is not None:
                times.append(p.pending_isr_retry_at)
        return min(times) if times else None

    def _park(self, table: dict, key: tuple[str, int], entry: Any) -> None:
        """Park a produce or fetch until its deadline (or until it can be answered)."""
        table.setdefault(key, []).append(entry)
        self._park_seq += 1
        heap = self._deadlines
        heapq.heappush(heap, (entry.deadline, self._park_seq, entry))
        if self._park_seq % 1024 == 0 and len(heap) > 1024:     # now and then: drop the done entries
            live = sum(len(parked) for t in (self._produces, self._fetches) for parked in t.values())
            if len(heap) > 2 * live:
                self._deadlines = [(d, n, x) for d, n, x in heap if not x.done]
                heapq.heapify(self._deadlines)

    def _reply(self, conn: Any, corr: Any, error: str | None = None, **fields) -> None:
        message = {"corr": corr, "error": error}
        message.update(fields)
        self._out.append(Reply(conn, message))

    def _log(self, text: str) -> None:
        self._out.append(Log(f"broker {self.id}: {text}"))

    def _request(self, dest: Any, api: str, body: dict, ctx: Any, now: int, timeout: int) -> int:
        self._corr += 1
        corr = self._corr
        message = {"api": api, "corr": corr}
        message.update(body)
        if self.cluster_secret is not None and dest != REMOTE_STORE:    # the store is no cluster member
            message[P.CLUSTER_SECRET] = self.cluster_secret
        self._pending[corr] = _Pending(corr, dest, api, ctx, now + timeout)
        self._out.append(Send(dest, message))
        return corr

    # ----------------------------------------------------------- periodic tasks
    def _run_periodic(self, now: int) -> None:
        c = self.config
        for name, at in sorted(self._periodic.items(), key=lambda kv: kv[1]):
            if at > now:
                continue
            if name == "heartbeat":
                self._heartbeat(now)
                self._periodic[name] = now + c["broker.heartbeat.interval.ms"]
            elif name == "isr-expiration":
                self._isr_expiration(now)
                self._periodic[name] = now + max(1, self.lag_ms // 2)
            elif name == "hw-checkpoint":
                self._checkpoint_hw()
                self._periodic[name] = now + c["replica.high.watermark.checkpoint.interval.ms"]
            elif name == "isr-propagation":
                self._propagate_isr_changes(now)
                self._periodic[name] = now + max(1, c["isr.change.propagation.interval.ms"])
            elif name == "flush":
                self._flush_due(now)
                self._periodic[name] = now + min(c["flush.ms"], 1000)
            elif name == "retention":
                self.tiered.retention(now)
                self._periodic[name] = now + c["log.retention.check.interval.ms"]
            elif name == "rlm":
                self.tiered.rlm_run(now)
                self._periodic[name] = now + c["remote.log.manager.task.interval.ms"]

    def _heartbeat(self, now: int) -> None:
        timeout = self.config["controller.socket.timeout.ms"]
        if self.broker_epoch is None:
            if not self._registering:
                self._registering = True
                self._request(CONTROLLER, P.REGISTER,
                              {"broker": self.id, "host": self.host, "port": self.port},
                              None, now, min(timeout, self.config["broker.session.timeout.ms"]))
        else:
            self._request(CONTROLLER, P.HEARTBEAT,
                          {"broker": self.id, "broker_epoch": self.broker_epoch, "seq": self.applied_seq},
                          self.broker_epoch, now, min(timeout, self.config["broker.session.timeout.ms"]))

    def _isr_expiration(self, now: int) -> None:
        """Kafka's isr-expiration task (every lag/2): a follower that has not caught
        up for replica.lag.time.max.ms leaves the ISR. The log line gives, per
        follower, how long ago it last caught up as this leader recorded it (-1:
        never), and how long ago the previous check ran, so that a reader can
        check the protocol (lag < caught-up age <= lag + check interval) without
        depending on how loaded the machine was."""
        previous = self._last_isr_check
        self._last_isr_check = now
        for p in self.partitions.values():
            if p.role != "leader" or p.pending_isr is not None:
                continue
            out = []
            for r in p.isr:
                if r == self.id:
                    continue
                rem = p.remotes.get(r)
                if rem is None or (rem.leo != p.leo and
                                   (rem.last_caught_up_ms is None or now - rem.last_caught_up_ms > self.lag_ms)):
                    out.append(r)
            if out:
                ages = [-1 if p.remotes.get(r) is None or p.remotes[r].last_caught_up_ms is None
                        else now - p.remotes[r].last_caught_up_ms for r in out]
                gap = -1 if previous is None else now - previous
                self._log(f"{p.topic}-{p.partition}: shrinking ISR {p.isr}: {out} out of sync (caught up {ages} "
                          f"ms ago, previous check {gap} ms ago, replica.lag.time.max.ms={self.lag_ms})")
                self._alter_isr(p, [r for r in p.isr if r not in out], now)

    def _checkpoint_hw(self) -> None:
        if self.partitions:
            self._out.append(WriteOffsetCheckpoint(
                HW_CHECKPOINT, {k: p.hw for k, p in sorted(self.partitions.items())}))
            self.tiered.checkpoint_log_start()

    def _propagate_isr_changes(self, now: int) -> None:
        c = self.config
        if self._isr_changes and (now - self._last_isr_change >= c["isr.change.propagation.blackout.ms"] or
                                  now - self._last_isr_propagation >= c["isr.change.propagation.max.interval.ms"]):
            parts = sorted(self._isr_changes)
            self._isr_changes.clear()
            self._last_isr_propagation = now
            self._request(CONTROLLER, P.ISR_CHANGE_NOTIFICATION,
                          {"broker": self.id, "partitions": [list(k) for k in parts]},
                          None, now, c["controller.socket.timeout.ms"])

    def _flush_due(self, now: int) -> None:
        for p in self.partitions.values():
            if p.first_unflushed_ms is not None and now - p.first_unflushed_ms >= p.config["flush.ms"]:
                self._flush(p)

    def _flush(self, p: Partition) -> None:
        self._out.append(Flush(p.topic, p.partition))
        p.flushed_to = p.leo
        p.first_unflushed_ms = None

    # ------------------------------------------------------------ log changes
    def _append(self, p: Partition, records: list, now: int, max_size: int | None = None) -> None:
        if max_size is None:
            max_size = max(P.record_size(r[3]) for r in records)
        if max_size > p.max_record_bytes:
            p.max_record_bytes = max_size
        if self.rules.epoch_cache:
            latest = p.epoch_cache.latest_epoch()
            changed = False
            for r in records:
                if r[1] > latest:
                    changed |= p.epoch_cache.assign(r[1], r[0])
                    latest = r[1]
            if changed:
                self._write_epochs(p)
        roll_if_due = self.tiered.roll_if_due
        for r in records:
            roll_if_due(p, r, now)
        p.records.extend(records)
        self._out.append(Append(p.topic, p.partition, records))
        if p.first_unflushed_ms is None:
            p.first_unflushed_ms = now
        if p.leo - p.flushed_to >= p.config["flush.messages"]:
            self._flush(p)

    def _truncate(self, p: Partition, offset: int) -> None:
        before = p.leo
        if p.truncate(offset):
            self._out.append(Truncate(p.topic, p.partition, offset))
            self._log(f"{p.topic}-{p.partition}: truncated from leo {before} to {offset}")
        if self.rules.epoch_cache and p.epoch_cache.truncate_from_end(offset):
            self._write_epochs(p)

    def _write_epochs(self, p: Partition) -> None:
        self._out.append(WriteEpochCheckpoint(p.topic, p.partition, p.epoch_cache.as_list()))

    # --------------------------------------------------------- client requests
    def _lookup(self, conn: Any, corr: Any, message: dict, leader_only: bool = True) -> Partition | None:
        topic = get_str(message, "topic")
        partition = get_int(message, "partition", minimum=0)
        p = self.partitions.get((topic, partition))
        if p is None:
            code = P.NOT_LEADER_OR_FOLLOWER if (topic, partition) in self.metadata else P.UNKNOWN_TOPIC_OR_PARTITION
            self._reply(conn, corr, code)
            return None
        if leader_only and p.role != "leader":
            self._reply(conn, corr, P.NOT_LEADER_OR_FOLLOWER, leader=p.leader, leader_epoch=p.leader_epoch)
            return None
        return p

    def _epoch_fenced(self, conn: Any, corr: Any, p: Partition, message: dict) -> bool:
        """Rule ``epoch_fencing`` (KIP-320): reject requests from an older or newer leader epoch."""
        if not self.rules.epoch_fencing:
            return False
        current = get_int(message, "current_leader_epoch", default=P.NO_EPOCH_CHECK)
        if current == P.NO_EPOCH_CHECK or current == p.leader_epoch:
            return False
        code = P.FENCED_LEADER_EPOCH if current < p.leader_epoch else P.UNKNOWN_LEADER_EPOCH
        self._reply(conn, corr, code, leader_epoch=p.leader_epoch)
        return True

    def _on_produce(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        acks = message.get("acks", 1)
        if acks in ("all", -1, "-1"):
            acks = P.ACKS_ALL
        elif acks not in (0, 1) or isinstance(acks, bool):
            raise BadRequest("field 'acks' must be 0, 1 or \"all\"")
        if "values" in message:
            values = message["values"]
            if not isinstance(values, list) or not values:
                raise BadRequest("field 'values' must be a non-empty list")
        elif "value" in message:
            values = [message["value"]]
        else:
            raise BadRequest("missing field 'values' (or 'value')")
        timeout = get_int(message, "timeout_ms", default=self.config["request.timeout.ms"], minimum=0)
        p = self._lookup(conn, corr, message)
        if p is None:
            return
        first, epoch = p.leo, p.leader_epoch
        records, size, largest = [], 0, 0
        try:
            for i, v in enumerate(values):
                crc, n = P.record_crc_and_size(v)
                records.append((first + i, epoch, crc, v))
                size += n
                if n > largest:
                    largest = n
        except (ValueError, TypeError, RecursionError) as e:     # NaN/Infinity: not JSON
            self._reply(conn, corr, P.INVALID_RECORD, message=f"{type(e).__name__}: {e}"[:200])
            return
        if size > self.config["message.max.bytes"]:
            self._reply(conn, corr, P.MESSAGE_TOO_LARGE,
                        message=f"{size} bytes of records > message.max.bytes={self.config['message.max.bytes']}")
            return
        min_isr = p.config["min.insync.replicas"]
        if acks == P.ACKS_ALL and len(p.isr) < min_isr:
            self._reply(conn, corr, P.NOT_ENOUGH_REPLICAS,
                        message=f"isr {p.isr} is smaller than min.insync.replicas={min_isr}")
            return
        self._append(p, records, now, largest)
        last = p.leo - 1
        self._wake_follower_fetches(p)
        self._maybe_increment_hw(p, now)
        if acks == 0:
            self._reply(conn, corr, None, offset=-1, last_offset=-1)
        elif acks == 1:
            self._reply(conn, corr, None, offset=first, last_offset=last)
        elif p.hw > last:
            self._complete_produce(p, conn, corr, first, last)
        else:
            self._park(self._produces, p.key, _ParkedProduce(conn, corr, first, last, now + timeout))

    def _complete_produce(self, p: Partition, conn: Any, corr: Any, first: int, last: int) -> None:
        if len(p.isr) < p.config["min.insync.replicas"]:
            self._reply(conn, corr, P.NOT_ENOUGH_REPLICAS_AFTER_APPEND, offset=first, last_offset=last)
        else:
            self._reply(conn, corr, None, offset=first, last_offset=last)

    def _on_fetch(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        offset = get_int(message, "offset")
        replica_id = get_int(message, "replica_id", default=P.CONSUMER_REPLICA_ID)
        max_records = get_int(message, "max_records", default=1000, minimum=1)
        max_bytes = min(get_int(message, "max_bytes", default=P.MAX_FETCH_BYTES, minimum=1),
                        self.config["fetch.max.bytes"], P.MAX_FETCH_BYTES)
        max_wait = get_int(message, "max_wait_ms", default=0, minimum=0)
        p = self._lookup(conn, corr, message)
        if p is None or self._epoch_fenced(conn, corr, p, message):
            return
        if replica_id >= 0 and not from_cluster(message, self.cluster_secret):
            replica_id = P.CONSUMER_REPLICA_ID      # not the cluster's: a consumer, whatever it claims
        if self.tiered.fetch_below_local(conn, corr, p, offset, replica_id, max_records, now):
            return
        if offset < max(p.local_start, p.log_start) or offset > p.leo:
            self._reply(conn, corr, P.OFFSET_OUT_OF_RANGE, hw=p.hw, leo=p.leo, log_start=p.log_start,
                        leader_epoch=p.leader_epoch, records=[])
            return
        if replica_id >= 0:
            if replica_id == self.id or replica_id not in p.replicas:
                self._reply(conn, corr, P.NOT_LEADER_OR_FOLLOWER, message=f"{replica_id} is not a follower")
                return
            self._update_follower(p, replica_id, offset, now, message.get("broker_epoch"))
            ready = offset < p.leo
        else:
            ready = offset < p.hw
        if ready or max_wait == 0:
            self._answer_fetch(p, conn, corr, offset, replica_id, max_records, max_bytes)
        else:
            self._park(self._fetches, p.key,
                       _ParkedFetch(conn, corr, offset, replica_id, max_records, now + max_wait,
                                    max_bytes=max_bytes))

    def _answer_fetch(self, p: Partition | None, conn: Any, corr: Any, offset: int,
                      replica_id: int, max_records: int, max_bytes: int | None = None) -> None:
        if p is None or p.role != "leader":
            self._reply(conn, corr, P.NOT_LEADER_OR_FOLLOWER)
            return
        limit = p.leo if replica_id >= 0 else p.hw
        self._reply(conn, corr, None, records=p.read(offset, limit, max_records, max_bytes), hw=p.hw,
                    log_start=p.log_start, leo=p.leo, leader_epoch=p.leader_epoch)

    def _wake_follower_fetches(self, p: Partition) -> None:
        parked = self._fetches.get(p.key)
        if not parked:
            return
        ready = [x for x in parked if x.replica_id >= 0 and x.offset < p.leo]
        if ready:
            self._fetches[p.key] = [x for x in parked if not (x.replica_id >= 0 and x.offset < p.leo)]
            for x in ready:
                x.done = True
                self._answer_fetch(p, x.conn, x.corr, x.offset, x.replica_id, x.max_records, x.max_bytes)

    def _on_hw_advanced(self, p: Partition) -> None:
        parked = self._produces.get(p.key)
        if parked:
            done = [x for x in parked if x.last < p.hw]
            if done:
                self._produces[p.key] = [x for x in parked if x.last >= p.hw]
                for x in done:
                    x.done = True
                    self._complete_produce(p, x.conn, x.corr, x.first, x.last)
        fetches = self._fetches.get(p.key)
        if fetches:
            ready = [x for x in fetches if x.replica_id < 0 and x.offset < p.hw]
            if ready:
                self._fetches[p.key] = [x for x in fetches if not (x.replica_id < 0 and x.offset < p.hw)]
                for x in ready:
                    x.done = True
                    self._answer_fetch(p, x.conn, x.corr, x.offset, x.replica_id, x.max_records, x.max_bytes)

    def _abort_parked(self, p: Partition) -> None:
        """Leadership changed: nothing parked here can be promised any more."""
        for x in self._produces.pop(p.key, []):
            x.done = True
            self._reply(x.conn, x.corr, P.REQUEST_TIMED_OUT, offset=x.first, last_offset=x.last,
                        message="leadership changed before the records were committed")
        for x in self._fetches.pop(p.key, []):
            x.done = True
            self._reply(x.conn, x.corr, P.NOT_LEADER_OR_FOLLOWER)

    def _on_list_offsets(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        spec = get_str(message, "spec")
        if spec not in ("earliest", "latest", "earliest_local"):
            raise BadRequest("field 'spec' must be \"earliest\", \"latest\" or \"earliest_local\"")
        p = self._lookup(conn, corr, message)
        if p is None or self._epoch_fenced(conn, corr, p, message):
            return
        if spec == "earliest_local":
            elo, epoch = self.tiered.earliest_local(p)
            self._reply(conn, corr, None, offset=elo, leader_epoch=epoch)
        else:
            self._reply(conn, corr, None, offset=p.log_start if spec == "earliest" else p.hw)

    def _on_metadata(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        topic = message.get("topic")
        if topic is not None and not isinstance(topic, str):
            raise BadRequest("field 'topic' must be a string or null")
        topics: dict = {}
        for (t, part), m in sorted(self.metadata.items()):
            if topic is None or t == topic:
                topics.setdefault(t, {})[str(part)] = {
                    "leader": m["leader"], "leader_epoch": m["leader_epoch"], "isr": list(m["isr"]),
                    "replicas": list(m["replicas"]), "version": m["version"]}
        self._reply(conn, corr, None, topics=topics, brokers=dict(self.brokers),
                    controller=self.controller_address)

    def _on_state(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        self._reply(conn, corr, None, **self.state())

    def _on_dump(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        self._reply(conn, corr, None, **self.dump())

    # ------------------------------------------------------------ leader side
    def _update_follower(self, p: Partition, replica_id: int, offset: int, now: int,
                         broker_epoch: int | None = None) -> None:
        rem = p.remotes.get(replica_id)
        if rem is None:
            rem = p.remotes[replica_id] = RemoteReplica()
        rem.leo = offset
        rem.broker_epoch = broker_epoch if isinstance(broker_epoch, int) and not isinstance(broker_epoch, bool) \
            else None
        if offset >= p.leo:
            rem.last_caught_up_ms = now
        elif offset >= rem.last_fetch_leader_leo and rem.last_fetch_time_ms is not None:
            rem.last_caught_up_ms = max(rem.last_caught_up_ms or 0, rem.last_fetch_time_ms)
        rem.last_fetch_leader_leo = p.leo
        rem.last_fetch_time_ms = now
        self._maybe_expand_isr(p, replica_id, rem, now)
        self._maybe_increment_hw(p, now)

    def _maybe_expand_isr(self, p: Partition, replica_id: int, rem: RemoteReplica, now: int) -> None:
        if replica_id in p.isr or p.pending_isr is not None or rem.leo < p.hw:
            return
        if self.rules.isr_needs_epoch_start and rem.leo < p.leader_epoch_start_offset:
            return
        self._log(f"{p.topic}-{p.partition}: expanding ISR {p.isr} with {replica_id} (leo {rem.leo} >= hw {p.hw})")
        self._alter_isr(p, p.isr + [replica_id], now)

    def _maybe_increment_hw(self, p: Partition, now: int) -> None:
        """HW = min LEO over the ISR (plus a pending addition and replicas caught up
        within replica.lag.time.max.ms); it only moves forward."""
        if p.role != "leader":
            return
        members = set(p.isr)
        if p.pending_isr is not None:
            members.update(p.pending_isr)
        new_hw = p.leo
        for r in members.union(p.remotes):
            if r == self.id:
                continue
            rem = p.remotes.get(r)
            leo = rem.leo if rem is not None else -1
            if leo >= new_hw:
                continue
            if r in members or (rem is not None and rem.last_caught_up_ms is not None
                                and now - rem.last_caught_up_ms <= self.lag_ms):
                new_hw = leo
        if new_hw > p.hw:
            p.hw = new_hw
            self._on_hw_advanced(p)

    def _alter_isr(self, p: Partition, new_isr: list, now: int) -> None:
        p.pending_isr = list(new_isr)
        # KIP-903: the broker epochs of the replicas added, as their fetches showed them now; a
        # retry sends the same ones (the request is about the incarnation that caught up)
        p.pending_isr_epochs = {str(r): p.remotes[r].broker_epoch for r in new_isr
                                if r not in p.isr and r in p.remotes and p.remotes[r].broker_epoch is not None} \
            if self.rules.isr_broker_epochs else None
        self._send_alter_isr(p, now)

    def _send_alter_isr(self, p: Partition, now: int) -> None:
        p.pending_isr_corr = self._request(
            CONTROLLER, P.ALTER_ISR,
            {"broker": self.id, "broker_epoch": self.broker_epoch, "topic": p.topic,
             "partition": p.partition, "leader_epoch": p.leader_epoch, "isr": list(p.pending_isr),
             "version": p.version, **({"broker_epochs": p.pending_isr_epochs} if p.pending_isr_epochs else {})},
            (p.key, p.leader_epoch), now, self.config["controller.socket.timeout.ms"])

    def _on_alter_isr_response(self, pending: _Pending, message: dict, now: int) -> None:
        key, epoch = pending.ctx
        p = self.partitions.get(key)
        if p is None or p.role != "leader" or p.leader_epoch != epoch or p.pending_isr_corr != pending.corr:
            return
        error = message.get("error")
        if error == P.NETWORK_ERROR:
            # Outcome unknown: keep counting the proposed members and ask again.
            p.pending_isr_retry_at = now + self.backoff_ms
            return
        p.pending_isr = None
        p.pending_isr_corr = None
        version = message.get("version")
        if (isinstance(version, int) and version > p.version and message.get("leader") == self.id
                and message.get("leader_epoch") == p.leader_epoch and isinstance(message.get("isr"), list)):
            old = p.isr
            p.isr = [int(r) for r in message["isr"]]
            p.version = version
            self.metadata.setdefault(key, {"topic": key[0], "partition": key[1], "replicas": p.replicas,
                                           "config": {}})
            self.metadata[key] = dict(self.metadata[key], leader=self.id, leader_epoch=p.leader_epoch,
                                      isr=list(p.isr), version=version)
            if old != p.isr:
                self._isr_changes.add(key)
                self._last_isr_change = now
                self._log(f"{p.topic}-{p.partition}: ISR {old} -> {p.isr} (version {version})")
        elif error is not None:
            self._log(f"{p.topic}-{p.partition}: AlterIsr failed: {error}")
        self._maybe_increment_hw(p, now)

    def _on_offsets_for_leader_epoch(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        epoch = get_int(message, "leader_epoch")
        if self.rules.epoch_lookup is EpochLookup.NONE:
            self._reply(conn, corr, P.UNSUPPORTED_API, message=f"era {self.era} has no leader epochs")
            return
        p = self._lookup(conn, corr, message)
        if p is None or self._epoch_fenced(conn, corr, p, message):
            return
        if self.rules.epoch_lookup is EpochLookup.SINGLE_ROUND:
            self._reply(conn, corr, None, leader_epoch=UNDEFINED,
                        end_offset=p.epoch_cache.kip101_end_offset(epoch, p.leo))
        else:
            e, end = p.epoch_cache.end_offset_for(epoch, p.leo)
            self._reply(conn, corr, None, leader_epoch=e, end_offset=end)

    # ---------------------------------------------------------- follower side
    def _follower_next(self, p: Partition, now: int) -> None:
        if p.role != "follower" or p.leader is None or p.inflight is not None or p.retry_at is not None:
            return
        current = p.leader_epoch if self.rules.epoch_fencing else P.NO_EPOCH_CHECK
        ctx = (p.key, p.leader, p.leader_epoch, p.leo)
        if p.fetch_state == FetchState.TRUNCATING:
            p.inflight = self._request(
                p.leader, P.OFFSETS_FOR_LEADER_EPOCH,
                {"topic": p.topic, "partition": p.partition, "leader_epoch": p.epoch_cache.latest_epoch(),
                 "current_leader_epoch": current, "replica_id": self.id},
                ctx, now, self.socket_ms)
        elif p.fetch_state == FetchState.BUILDING_AUX:
            self.tiered.aux_next(p, now)
        elif p.fetch_state == FetchState.FETCHING:
            p.inflight = self._request(
                p.leader, P.FETCH,
                {"topic": p.topic, "partition": p.partition, "offset": p.leo, "replica_id": self.id,
                 "max_records": self.config["replica.fetch.max.records"], "max_wait_ms": self.wait_ms,
                 "max_bytes": self.config["replica.fetch.max.bytes"],
                 "current_leader_epoch": current, "broker_epoch": self.broker_epoch},
                ctx, now, self.wait_ms + self.socket_ms)

    def _follower_response_target(self, pending: _Pending) -> Partition | None:
        key, leader, epoch, _ = pending.ctx
        p = self.partitions.get(key)
        if p is None or p.inflight != pending.corr:
            return None
        p.inflight = None
        if p.role != "follower" or p.leader != leader or p.leader_epoch != epoch:
            return None
        return p

    def _on_fetch_response(self, pending: _Pending, message: dict, now: int) -> None:
        p = self._follower_response_target(pending)
        if p is None:
            return
        fetch_offset = pending.ctx[3]
        error = message.get("error")
        if error is None:
            records = message["records"]
            if not isinstance(records, list):
                raise BadRequest("records must be a list")
            if fetch_offset == p.leo:
                recs = [(int(r[0]), int(r[1]), int(r[2]), r[3]) for r in records]
                if recs and any(r[0] != fetch_offset + i for i, r in enumerate(recs)):
                    raise BadRequest("records are not contiguous from the fetch offset")
                if recs:
                    self._append(p, recs, now)
                leader_hw = message["hw"]
                if not isinstance(leader_hw, int):
                    raise BadRequest("hw must be an integer")
                p.hw = max(p.local_start, min(p.leo, leader_hw))
                leader_start = message.get("log_start")
                if isinstance(leader_start, int):
                    p.log_start = min(max(p.log_start, leader_start), p.local_start)
            self._follower_next(p, now)
        elif error == P.OFFSET_MOVED_TO_TIERED_STORAGE:
            self.tiered.on_offset_moved(p, message, now)
        elif error == P.OFFSET_OUT_OF_RANGE:
            leader_leo = message["leo"]
            leader_start = message.get("log_start")
            if not isinstance(leader_leo, int):
                raise BadRequest("leo must be an integer")
            if isinstance(leader_start, int) and p.leo < leader_start:
                # Kafka's handleOffsetOutOfRange: the leader's retention went past us.
                self._log(f"{p.topic}-{p.partition}: fetch offset {p.leo} below leader log start {leader_start}")
                p.log_start = leader_start
                self.tiered.reset_log(p, leader_start, now)
                if self.rules.epoch_cache and p.epoch_cache.entries:
                    p.epoch_cache = EpochCache()
                    self._write_epochs(p)
                self._follower_next(p, now)
            elif p.leo > leader_leo:
                self._log(f"{p.topic}-{p.partition}: fetch offset {p.leo} above leader leo {leader_leo}")
                self._truncate(p, leader_leo)
                self._follower_next(p, now)
            else:
                p.retry_at = now + self.backoff_ms
        else:
            p.retry_at = now + self.backoff_ms

    def _on_epoch_response(self, pending: _Pending, message: dict, now: int) -> None:
        p = self._follower_response_target(pending)
        if p is None:
            return
        if p.fetch_state != FetchState.TRUNCATING:
            self._follower_next(p, now)
            return
        if message.get("error") is not None:
            p.retry_at = now + self.backoff_ms
            return
        end = message["end_offset"]
        leader_epoch = message.get("leader_epoch", UNDEFINED)
        if not isinstance(end, int) or not isinstance(leader_epoch, int):
            raise BadRequest("end_offset and leader_epoch must be integers")
        done = True
        if end == P.UNDEFINED_OFFSET:
            target = p.hw
        elif self.rules.epoch_lookup is EpochLookup.SINGLE_ROUND:
            target = min(end, p.leo)
        else:
            f_epoch, f_end = p.epoch_cache.end_offset_for(leader_epoch, p.leo)
            if f_end == P.UNDEFINED_OFFSET:
                target = min(end, p.leo)
            elif f_epoch != leader_epoch:
                target = min(f_end, p.leo)
                done = False
            else:
                target = min(f_end, end, p.leo)
        self._log(f"{p.topic}-{p.partition}: epoch answer ({leader_epoch}, {end}) -> truncate to {target}"
                  + ("" if done else ", ask again"))
        self._truncate(p, target)
        if done:
            p.fetch_state = FetchState.FETCHING
        self._follower_next(p, now)

    # ------------------------------------------------------ controller traffic
    def _dispatch_response(self, pending: _Pending, message: dict, now: int) -> None:
        api = pending.api
        if pending.dest == CONTROLLER and message.get("error") == P.CLUSTER_AUTHORIZATION_FAILED:
            self._out.append(Exit(f"broker {self.id}: the controller refused our cluster secret ({api}): "
                                  "start every process of the cluster with the same --cluster-secret-file"))
            return
        if api == P.FETCH:
            self._on_fetch_response(pending, message, now)
        elif api == P.OFFSETS_FOR_LEADER_EPOCH:
            self._on_epoch_response(pending, message, now)
        elif api == P.ALTER_ISR:
            self._on_alter_isr_response(pending, message, now)
        elif api in TIERED_APIS:
            self.tiered.on_response(pending, message, now)
        elif api == P.REGISTER:
            self._registering = False
            epoch = message.get("broker_epoch")
            if message.get("error") is None and isinstance(epoch, int):
                self.broker_epoch = epoch
                self.applied_seq = 0
                self._log(f"registered with broker epoch {epoch}")
        elif api == P.HEARTBEAT:
            error = message.get("error")
            if error == P.STALE_BROKER_EPOCH and pending.ctx == self.broker_epoch:
                self._log("session expired at the controller; registering again")
                self.broker_epoch = None
                self._periodic["heartbeat"] = now
                self._run_periodic(now)
            elif error is None and isinstance(message.get("sync"), dict):
                self._apply_push(message["sync"], now)

    def _on_leader_and_isr(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        if not from_cluster(message, self.cluster_secret):
            self._reply(conn, corr, P.CLUSTER_AUTHORIZATION_FAILED, message="not from this cluster's controller")
            return
        seq = get_int(message, "seq", default=0)
        self._apply_push(message, now)
        self._reply(conn, corr, None, seq=seq)

    def _apply_push(self, message: dict, now: int) -> None:
        brokers = message.get("brokers") or {}
        partitions = message.get("partitions") or []
        if not isinstance(brokers, dict) or not isinstance(partitions, list):
            raise BadRequest("brokers must be an object and partitions a list")
        updates = [_check_update(u) for u in partitions]
        self.brokers.update({str(k): v for k, v in brokers.items()})
        for u in updates:
            self._apply_partition_update(u, now)
        seq = message.get("seq")
        if isinstance(seq, int):
            self.applied_seq = max(self.applied_seq, seq)

    def _apply_partition_update(self, u: dict, now: int) -> None:
        key = (u["topic"], u["partition"])
        known = self.metadata.get(key)
        if known is not None and known["version"] >= u["version"]:
            return
        self.metadata[key] = u
        if self.id not in u["replicas"]:
            p = self.partitions.get(key)
            if p is not None and p.role != "none":   # reassigned away: stop replicating (the files stay)
                self._abort_parked(p)
                p.role, p.fetch_state, p.inflight, p.retry_at = "none", FetchState.IDLE, None, None
                p.remotes = {}
                p.pending_isr = p.pending_isr_corr = p.pending_isr_retry_at = None
                p.replicas, p.isr, p.version = list(u["replicas"]), list(u["isr"]), u["version"]
                p.leader, p.leader_epoch = u["leader"], u["leader_epoch"]
                self._log(f"{p.topic}-{p.partition}: no longer a replica (replicas {p.replicas})")
            return
        p = self.partitions.get(key)
        if p is None:
            p = self.partitions[key] = Partition(key[0], key[1])
        if p.version >= u["version"]:
            return
        p.config = cfg.topic_config(self.config, u.get("config"))
        old_role, old_leader, old_epoch = p.role, p.leader, p.leader_epoch
        p.replicas = list(u["replicas"])
        p.isr = list(u["isr"])
        p.version = u["version"]
        p.leader, p.leader_epoch = u["leader"], u["leader_epoch"]
        if p.leader == self.id:
            if old_role != "leader" or old_epoch != p.leader_epoch:
                self._become_leader(p, now)
            else:
                p.pending_isr = None
                p.pending_isr_corr = None
                p.pending_isr_retry_at = None
                self._maybe_increment_hw(p, now)
        elif old_role == "none" or old_leader != p.leader or old_epoch != p.leader_epoch:
            self._become_follower(p, now)

    def _become_leader(self, p: Partition, now: int) -> None:
        self._abort_parked(p)
        p.role = "leader"
        p.fetch_state, p.inflight, p.retry_at = FetchState.IDLE, None, None
        p.pending_isr = p.pending_isr_corr = p.pending_isr_retry_at = None
        p.remotes = {r: RemoteReplica(last_caught_up_ms=now if r in p.isr else None)
                     for r in p.replicas if r != self.id}
        if self.rules.assign_epoch_at_election and p.epoch_cache.assign(p.leader_epoch, p.leo):
            self._write_epochs(p)
        p.leader_epoch_start_offset = p.leo
        p.aux = None
        if p.config["remote.storage.enable"]:
            p.remote_loaded = False       # the RLM reads the remote metadata first
            self._periodic["rlm"] = now
        self._log(f"{p.topic}-{p.partition}: leader in epoch {p.leader_epoch} at leo {p.leo} "
                  f"hw {p.hw} isr {p.isr}")
        self._maybe_increment_hw(p, now)

    def _become_follower(self, p: Partition, now: int) -> None:
        self._abort_parked(p)
        p.remotes = {}
        p.pending_isr = p.pending_isr_corr = p.pending_isr_retry_at = None
        p.inflight, p.retry_at = None, None
        if p.leader is None:
            p.role, p.fetch_state = "none", FetchState.IDLE
            self._log(f"{p.topic}-{p.partition}: no leader in epoch {p.leader_epoch}")
            return
        p.role = "follower"
        self._log(f"{p.topic}-{p.partition}: follower of {p.leader} in epoch {p.leader_epoch} "
                  f"at leo {p.leo} hw {p.hw}")
        if p.aux is not None and p.aux.get("elo") is not None:
            p.fetch_state = FetchState.BUILDING_AUX   # the rebuild does not depend on the leader: go on
        elif self.rules.truncate_to_hw or p.epoch_cache.latest_epoch() == UNDEFINED:
            p.aux = None
            self._truncate(p, p.hw)
            p.fetch_state = FetchState.FETCHING
        else:
            p.aux = None
            p.fetch_state = FetchState.TRUNCATING
        self._follower_next(p, now)


def _check_update(u: Any) -> dict:
    """Validate one PARTITION_UPDATE from the controller before applying any."""
    if not isinstance(u, dict):
        raise BadRequest("a partition update must be an object")
    out = {"topic": get_str(u, "topic"), "partition": get_int(u, "partition", minimum=0),
           "leader_epoch": get_int(u, "leader_epoch"), "version": get_int(u, "version")}
    leader = u.get("leader")
    if leader is not None and (isinstance(leader, bool) or not isinstance(leader, int)):
        raise BadRequest("leader must be an integer or null")
    out["leader"] = leader
    for name in ("isr", "replicas"):
        v = u.get(name)
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise BadRequest(f"{name} must be a list of broker ids")
        out[name] = list(v)
    conf = u.get("config") or {}
    if not isinstance(conf, dict):
        raise BadRequest("config must be an object")
    out["config"] = conf
    return out

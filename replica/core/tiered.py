"""Segments, retention and tiered storage (KIP-405) of the broker core.

An object the broker core holds (``BrokerCore.tiered``, a ``TieredStorage``):
what KIP-405 adds to a broker, kept apart from the replication protocol in
``broker.py``. The core calls its public methods (recovery, rolling, retention,
the RLM task, fetches below the local log, the follower's ELO path, responses
to tiered requests); it answers through the core's action list.

- Segments: the local log rolls (``log.segment.bytes``, ``log.roll.ms``,
  checked per record at append); the last segment is active.
- Retention (every ``log.retention.check.interval.ms``): without remote
  storage ``retention.*`` deletes local segments below the HW; with it,
  ``local.retention.*`` deletes local segments that are already remote.
- The remote log manager (RLM, every ``remote.log.manager.task.interval.ms``):
  every replica refreshes the partition's remote metadata from the controller;
  the leader copies its oldest rolled segment not yet remote whose end is below
  the HW (metadata COPY_SEGMENT_STARTED, the segment, its offset index, its
  leader-epoch checkpoint, COPY_SEGMENT_FINISHED) and deletes remote segments
  past ``retention.*`` (DELETE_SEGMENT_STARTED, objects, DELETE_SEGMENT_FINISHED).
  One operation per partition at a time; a copy that fails is abandoned and
  tried again with a new id; a copy under way when leadership moves finishes.
- The follower path: a fetch below the leader's local log start answers
  OFFSET_MOVED_TO_TIERED_STORAGE; the follower asks ListOffsets(earliest_local)
  for the ELO and its epoch, drops its local log and epoch cache and starts the
  log at the ELO, then in ``building_remote_log_aux`` reads the remote metadata
  until a finished segment holds ELO-1, reads that segment's epoch checkpoint,
  keeps its entries below the ELO, adds (ELO epoch, ELO) and fetches from the
  ELO. ``remote.log.follower.skip.aux.state`` (a deliberate bug, off by
  default) skips the rebuild and keeps the cache it had.
- Consumers below the local log start are served from remote segments
  (fetched once, checked, kept in a small cache).
"""

from __future__ import annotations

from typing import Any

from .. import protocol as P
from .. import storage as S
from .actions import CONTROLLER, REMOTE_STORE, DeleteSegments, ResetLog, Roll, WriteOffsetCheckpoint
from .epoch_cache import EpochCache
from .partition import FetchState, Partition

BUILDING_AUX = FetchState.BUILDING_AUX
TIERED_APIS = (P.LIST_OFFSETS, P.LIST_REMOTE_SEGMENTS, P.PUT_REMOTE_SEGMENT, P.GET_OBJECT, P.PUT_OBJECT,
               P.DELETE_OBJECT)
REMOTE_CACHE_SEGMENTS = 16
FOREVER = -1
AS_WHOLE_LOG = -2


def disk_size(value) -> int:
    """Bytes of a record in a segment file (``replica/storage.py``'s format), what
    ``log.segment.bytes`` and the retention sizes count."""
    return S.RECORD_OVERHEAD + len(S.encode_value(value))


def object_keys(topic: str, partition: int, segment: dict) -> dict:
    """Object names of one remote segment: the data, Kafka's offset index and the
    leader-epoch checkpoint as of the segment's end (its auxiliary state)."""
    stem = f"{topic}-{partition}/{segment['base']:020d}-{segment['id']}"
    return {"log": stem + ".log", "index": stem + ".index", "epochs": stem + ".leader-epoch-checkpoint"}


def covering(segments: list, offset: int) -> dict | None:
    """The finished remote segment holding ``offset`` (the latest copy when several do)."""
    found = None
    for s in segments:
        if s["state"] == P.COPY_SEGMENT_FINISHED and s["base"] <= offset <= s["end"]:
            found = s
    return found


def segment_epochs(cache: EpochCache, base: int, end: int) -> list:
    """The epochs whose records lie in [base, end], with their start offsets (the metadata's
    ``segment epochs``; the first one may start below ``base``)."""
    out = []
    entries = cache.entries
    for i, (epoch, start) in enumerate(entries):
        nxt = entries[i + 1][1] if i + 1 < len(entries) else None
        if start <= end and (nxt is None or nxt > base) and (nxt is None or nxt > start):
            out.append([epoch, start])
    return out


def _effective(value: int, whole: int) -> int:
    return whole if value == AS_WHOLE_LOG else value


class TieredStorage:
    """KIP-405 for one ``BrokerCore``, which holds it as ``core.tiered``; see the module docstring.

    It keeps no partition state of its own (that is on each ``Partition``: segments,
    local start, remote metadata, the RLM's operation, the follower's rebuild) and
    speaks through its core: the core's action list, requests and replies, so a
    tiered input still gives one list of actions."""

    def __init__(self, core: Any):   # the BrokerCore that holds it (replica/core/broker.py; not imported: no cycle)
        self.core = core
        self.segment_counter = 0                     # part of a new remote segment's id
        self.remote_segments: dict[str, list] = {}   # segment id -> its records, REMOTE_CACHE_SEGMENTS at most

    # ------------------------------------------------------------ recovery
    def recover_segments(self, p: Partition, disk: dict, now: int) -> None:
        """Segments, local and whole-log start of a partition read from disk."""
        local = int(disk.get("local_start", disk.get("log_start", 0)))
        if p.records:
            local = p.records[0][0]
        p.local_start = local
        p.log_start = min(int(disk.get("log_start", local)), local)
        bases = [int(b) for b in disk.get("segments", [])] or [local]
        bases = [b for b in bases if local <= b <= p.leo] or [local]
        if bases[0] != local:
            bases.insert(0, local)
        p.segments = []
        for i, base in enumerate(bases):
            nxt = bases[i + 1] if i + 1 < len(bases) else p.leo
            size = sum(disk_size(r[3]) for r in p.records[base - local:nxt - local])
            p.segments.append([base, size, now, now])

    # ------------------------------------------------------------- segments
    def roll_if_due(self, p: Partition, record: tuple, now: int) -> None:
        """Before appending ``record``: roll a non-empty active segment that is full or old."""
        active = p.segments[-1]
        size = disk_size(record[3])
        if active[1] > 0 and (active[1] + size > p.config["log.segment.bytes"]
                              or now - active[2] >= p.config["log.roll.ms"]):
            self.core._out.append(Roll(p.topic, p.partition, record[0]))
            active = [record[0], 0, now, now]
            p.segments.append(active)
        if active[1] == 0:
            active[2] = now
        active[1] += size
        active[3] = now

    def reset_log(self, p: Partition, offset: int, now: int) -> None:
        """Drop the local log and continue it at ``offset``."""
        self.core._out.append(ResetLog(p.topic, p.partition, offset))
        p.records = []
        p.local_start = offset
        p.log_start = min(p.log_start, offset)
        p.segments = [[offset, 0, now, now]]
        p.hw = offset
        p.flushed_to = offset
        p.first_unflushed_ms = None

    def _delete_local_below(self, p: Partition, offset: int) -> None:
        """Retention: drop the rolled segments below ``offset`` (a segment base)."""
        self.core._out.append(DeleteSegments(p.topic, p.partition, offset))
        del p.records[:offset - p.local_start]
        p.segments = [s for s in p.segments if s[0] >= offset]
        self.core._log(f"{p.topic}-{p.partition}: local log start {p.local_start} -> {offset}")
        p.local_start = offset

    def checkpoint_log_start(self) -> None:
        if self.core.partitions:
            self.core._out.append(WriteOffsetCheckpoint(
                S.LOG_START_OFFSET_CHECKPOINT, {k: p.log_start for k, p in sorted(self.core.partitions.items())}))

    # ------------------------------------------------------------- retention
    def retention(self, now: int) -> None:
        for p in self.core.partitions.values():
            c = p.config
            active = p.segments[-1]
            if active[1] > 0 and now - active[2] >= c["log.roll.ms"]:
                # Kafka rolls only at append; a quiet partition would never tier its
                # last records, so the retention check rolls an old active segment too.
                self.core._out.append(Roll(p.topic, p.partition, p.leo))
                p.segments.append([p.leo, 0, now, now])
            remote = c["remote.storage.enable"]
            if remote:
                limit_ms = _effective(c["local.retention.ms"], c["retention.ms"])
                limit_bytes = _effective(c["local.retention.bytes"], c["retention.bytes"])
                safe = p.remote_end            # only what is already remote may go
            else:
                limit_ms, limit_bytes, safe = c["retention.ms"], c["retention.bytes"], p.hw
            total = sum(s[1] for s in p.segments)
            cut = None
            for i, seg in enumerate(p.segments[:-1]):
                nxt = p.segments[i + 1][0]
                if nxt > safe or nxt > p.hw:
                    break
                too_big = limit_bytes != FOREVER and total > limit_bytes
                too_old = limit_ms != FOREVER and now - seg[3] > limit_ms
                if not (too_big or too_old):
                    break
                total -= seg[1]
                cut = nxt
            if cut is not None:
                self._delete_local_below(p, cut)
                if not remote:
                    p.log_start = max(p.log_start, cut)
                self.checkpoint_log_start()

    # ---------------------------------------------------------- the RLM task
    def rlm_run(self, now: int) -> None:
        for p in self.core.partitions.values():
            if not p.config["remote.storage.enable"] or p.rlm is not None or p.role == "none":
                continue
            if p.role == "follower" or not p.remote_loaded:
                self._rlm_request(p, CONTROLLER, P.LIST_REMOTE_SEGMENTS,
                                  {"topic": p.topic, "partition": p.partition}, {"op": "load"}, now)
            else:
                self._rlm_next_operation(p, now)

    def _rlm_request(self, p: Partition, dest: Any, api: str, body: dict, op: dict, now: int) -> None:
        p.rlm = op
        timeout = self.core.config["controller.socket.timeout.ms"] if dest == CONTROLLER else self.core.socket_ms
        self.core._request(dest, api, body, ("rlm", p.key, id(op)), now, timeout)

    def _rlm_next_operation(self, p: Partition, now: int) -> None:
        """Leader: copy the next eligible segment, else delete one past retention."""
        if p.role != "leader":
            return
        start = max(p.remote_end if p.remote_end >= 0 else p.local_start, p.log_start)
        for i, seg in enumerate(p.segments[:-1]):
            nxt = p.segments[i + 1][0]
            if nxt <= start or nxt > p.hw or nxt == seg[0]:
                continue
            self._rlm_copy(p, seg, nxt, now)
            return
        victim = self._remote_past_retention(p, now)
        if victim is not None:
            self._rlm_delete(p, victim, now)

    def _rlm_copy(self, p: Partition, seg: list, nxt: int, now: int) -> None:
        base, end = seg[0], nxt - 1
        # A copy of ours abandoned in this epoch is done again under its id (PUTs are
        # idempotent), so a store outage does not pile up started segments.
        meta = next((dict(s) for s in p.remote if s["state"] == P.COPY_SEGMENT_STARTED and s["broker"] == self.core.id
                     and s["leader_epoch"] == p.leader_epoch and (s["base"], s["end"]) == (base, end)), None)
        if meta is None:
            self.segment_counter += 1
            meta = {"id": f"{base}-{end}-b{self.core.id}e{p.leader_epoch}n{self.segment_counter}",
                    "base": base, "end": end, "epochs": segment_epochs(p.epoch_cache, base, end),
                    "state": P.COPY_SEGMENT_STARTED, "broker": self.core.id, "leader_epoch": p.leader_epoch,
                    "size": seg[1], "max_ms": seg[3]}
        records = p.read(base, nxt, nxt - base)
        keys = object_keys(p.topic, p.partition, meta)
        checkpoint = [(e, o) for e, o in p.epoch_cache.entries if o <= end]
        objects = [(keys["log"], S.encode_records(records)),
                   (keys["index"], S.encode_offset_index(records, base)),
                   (keys["epochs"], S.format_leader_epoch_checkpoint(checkpoint))]
        self.core._log(f"{p.topic}-{p.partition}: RLM copies segment {base}..{end} as {meta['id']}")
        op = {"op": "copy", "meta": meta, "objects": objects}
        if any(s["id"] == meta["id"] for s in p.remote):
            p.rlm = op
            self._rlm_continue(p, op, now)
        else:
            self._rlm_put_metadata(p, meta, op, now)

    def _rlm_delete(self, p: Partition, meta: dict, now: int) -> None:
        meta = dict(meta, state=P.DELETE_SEGMENT_STARTED)
        keys = object_keys(p.topic, p.partition, meta)
        self.core._log(f"{p.topic}-{p.partition}: RLM deletes remote segment {meta['base']}..{meta['end']} "
                  f"({meta['id']}): past retention")
        self._rlm_put_metadata(p, meta, {"op": "delete", "meta": meta,
                                         "objects": [(k, None) for k in keys.values()]}, now)

    def _rlm_put_metadata(self, p: Partition, meta: dict, op: dict, now: int) -> None:
        self._rlm_request(p, CONTROLLER, P.PUT_REMOTE_SEGMENT,
                          {"broker": self.core.id, "broker_epoch": self.core.broker_epoch, "topic": p.topic,
                           "partition": p.partition, "leader_epoch": p.leader_epoch, "segment": meta},
                          op, now)

    def _remote_past_retention(self, p: Partition, now: int) -> dict | None:
        c = p.config
        finished = [s for s in p.remote if s["state"] == P.COPY_SEGMENT_FINISHED]
        if not finished:
            return None
        oldest = min(finished, key=lambda s: (s["base"], s["end"]))
        if oldest["end"] >= p.local_start - 1 and len(finished) == 1 and oldest["end"] >= p.hw:
            return None
        if c["retention.ms"] != FOREVER and now - oldest.get("max_ms", now) > c["retention.ms"]:
            return oldest
        if c["retention.bytes"] != FOREVER:
            remote_only = sum(s["size"] for s in finished if s["end"] < p.local_start)
            if remote_only + sum(s[1] for s in p.segments) - oldest["size"] >= c["retention.bytes"]:
                return oldest
        return None

    def _on_rlm_response(self, p: Partition, pending, message: dict, now: int) -> None:
        op = p.rlm
        if op is None or pending.ctx[2] != id(op):
            return
        error = message.get("error")
        if error is not None:
            self.core._log(f"{p.topic}-{p.partition}: RLM {op['op']} {pending.api} failed: {error}; "
                      "abandoned, tried again next run")
            p.rlm = None
            return
        if pending.api in (P.LIST_REMOTE_SEGMENTS, P.PUT_REMOTE_SEGMENT):
            self._adopt_remote(p, message.get("segments"))
        if op["op"] == "load":
            p.rlm = None
            p.remote_loaded = True
            self._rlm_next_operation(p, now)
            return
        self._rlm_continue(p, op, now)

    def _rlm_continue(self, p: Partition, op: dict, now: int) -> None:
        """The next step of a copy or deletion: an object, then the next metadata state."""
        objects, meta = op["objects"], op["meta"]
        if objects:
            key, data = objects.pop(0)
            if data is None:
                self._rlm_request(p, REMOTE_STORE, P.DELETE_OBJECT, {"key": key}, op, now)
            else:
                self._rlm_request(p, REMOTE_STORE, P.PUT_OBJECT, {"key": key, "data": data}, op, now)
            return
        if meta["state"] in (P.COPY_SEGMENT_STARTED, P.DELETE_SEGMENT_STARTED):
            done = P.COPY_SEGMENT_FINISHED if meta["state"] == P.COPY_SEGMENT_STARTED else P.DELETE_SEGMENT_FINISHED
            op["meta"] = dict(meta, state=done)
            self._rlm_put_metadata(p, op["meta"], op, now)
            return
        p.rlm = None
        self.core._log(f"{p.topic}-{p.partition}: remote segment {meta['id']} {meta['state']}; "
                  f"remote end {p.remote_end}")
        if meta["state"] == P.DELETE_SEGMENT_FINISHED:
            # The whole log now starts after the deleted segment; local segments
            # wholly below the new log start go too (Kafka: maybeIncrementLogStartOffset).
            p.log_start = max(p.log_start, meta["end"] + 1)
            bases = [seg[0] for seg in p.segments[1:] if seg[0] <= p.log_start]
            if bases:
                self._delete_local_below(p, bases[-1])
            self.checkpoint_log_start()
        self._rlm_next_operation(p, now)

    def _adopt_remote(self, p: Partition, segments: Any) -> None:
        if not isinstance(segments, list) or not all(isinstance(s, dict) for s in segments):
            raise ValueError("segments must be a list of remote segments")
        p.remote = [dict(s) for s in segments]

    # ------------------------------------------------------------ leader side
    def fetch_below_local(self, conn: Any, corr: Any, p: Partition, offset: int, replica_id: int,
                      max_records: int, now: int) -> bool:
        """A fetch below the local log start: OMTS for a follower, a remote read for a
        consumer. False when it is not such a fetch (the caller goes on)."""
        if offset >= p.local_start or offset < p.log_start or not p.config["remote.storage.enable"]:
            return False
        if replica_id >= 0:
            self.core._reply(conn, corr, P.OFFSET_MOVED_TO_TIERED_STORAGE, hw=p.hw, leo=p.leo,
                        log_start=p.log_start, local_log_start=p.local_start,
                        leader_epoch=p.leader_epoch, records=[])
            return True
        seg = covering(p.remote, offset)
        if seg is None:
            self.core._reply(conn, corr, P.KAFKA_STORAGE_ERROR, records=[],
                        message=f"no finished remote segment holds offset {offset} "
                                f"(remote metadata {'loaded' if p.remote_loaded else 'not loaded yet'})")
            return True
        cache = self.remote_segments
        if seg["id"] in cache:
            self._answer_remote(p, conn, corr, offset, max_records, cache[seg["id"]])
        else:
            self.core._request(REMOTE_STORE, P.GET_OBJECT, {"key": object_keys(p.topic, p.partition, seg)["log"]},
                          ("read", p.key, seg, conn, corr, offset, max_records), now, self.core.socket_ms)
        return True

    def _answer_remote(self, p: Partition, conn: Any, corr: Any, offset: int, max_records: int,
                       records: list) -> None:
        base = records[0][0]
        out, total = [], 0
        for r in records[offset - base:offset - base + max_records]:
            total += P.record_size(r[3])
            if out and total > P.MAX_FETCH_BYTES:       # a reply stays within a frame (KIP-74)
                break
            out.append(list(r))
        self.core._reply(conn, corr, None, records=out, hw=p.hw, log_start=p.log_start, leo=p.leo,
                    leader_epoch=p.leader_epoch)

    def _on_remote_read(self, pending, message: dict, now: int) -> None:
        _, key, seg, conn, corr, offset, max_records = pending.ctx
        p = self.core.partitions.get(key)
        if p is None:
            return
        error = message.get("error")
        try:
            if error is not None:
                raise S.StorageError(f"GetObject: {error}")
            data = message.get("data")
            if not isinstance(data, (bytes, bytearray)):
                raise S.StorageError("GetObject answered without data")
            records = [tuple(r) for r in S.decode_records(bytes(data), seg["base"])]
            if not records or records[-1][0] != seg["end"]:
                raise S.StorageError(f"holds {len(records)} records, metadata says {seg['base']}..{seg['end']}")
        except S.StorageError as e:
            self.core._log(f"{p.topic}-{p.partition}: remote segment {seg['id']} unreadable: {e}")
            self.core._reply(conn, corr, P.KAFKA_STORAGE_ERROR, records=[], message=f"remote segment {seg['id']}: {e}")
            return
        cache = self.remote_segments
        cache[seg["id"]] = records
        while len(cache) > REMOTE_CACHE_SEGMENTS:
            cache.pop(next(iter(cache)))
        self._answer_remote(p, conn, corr, offset, max_records, records)

    def earliest_local(self, p: Partition) -> tuple[int, int]:
        """(ELO, its leader epoch): KIP-405's ListOffsets(EARLIEST_LOCAL_TIMESTAMP)."""
        if p.records:
            return p.local_start, p.records[0][1]
        return p.local_start, p.leader_epoch

    # ---------------------------------------------------------- follower side
    def on_offset_moved(self, p: Partition, message: dict, now: int) -> None:
        """OFFSET_MOVED_TO_TIERED_STORAGE: ask the leader for its earliest local offset."""
        leader_start = message.get("log_start")
        if not isinstance(leader_start, int):
            raise ValueError("log_start must be an integer")
        self.core._log(f"{p.topic}-{p.partition}: fetch at {p.leo} moved to tiered storage; asking for the ELO")
        p.aux = {"elo": None, "leader_log_start": leader_start}
        p.inflight = self.core._request(
            p.leader, P.LIST_OFFSETS,
            {"topic": p.topic, "partition": p.partition, "spec": "earliest_local",
             "current_leader_epoch": p.leader_epoch if self.core.rules.epoch_fencing else P.NO_EPOCH_CHECK,
             "replica_id": self.core.id},
            (p.key, p.leader, p.leader_epoch, p.leo), now, self.core.socket_ms)

    def _on_elo(self, p: Partition, message: dict, now: int) -> None:
        elo, elo_epoch = message["offset"], message.get("leader_epoch", -1)
        if not isinstance(elo, int) or not isinstance(elo_epoch, int):
            raise ValueError("offset and leader_epoch must be integers")
        aux = p.aux or {}
        self.core._log(f"{p.topic}-{p.partition}: ELO {elo} in epoch {elo_epoch}; local log {p.local_start}..{p.leo}")
        if p.leo >= elo:                       # the leader's local log reaches us again
            p.aux = None
            return
        p.log_start = min(aux.get("leader_log_start", elo), elo)
        self.reset_log(p, elo, now)
        if p.config["remote.log.follower.skip.aux.state"]:
            self.core._log(f"{p.topic}-{p.partition}: skipping BuildingRemoteLogAux (remote.log.follower.skip."
                      f"aux.state), epochs stay {p.epoch_cache.as_list()}")
            p.aux = None
            return
        p.epoch_cache = EpochCache()
        self.core._write_epochs(p)
        p.aux = {"elo": elo, "elo_epoch": elo_epoch, "segment": None}
        p.fetch_state = FetchState.BUILDING_AUX

    def aux_next(self, p: Partition, now: int) -> None:
        """One request of BuildingRemoteLogAux: the metadata, then the epoch checkpoint."""
        aux = p.aux
        ctx = (p.key, p.leader, p.leader_epoch, p.leo)
        if aux["segment"] is None:
            p.inflight = self.core._request(CONTROLLER, P.LIST_REMOTE_SEGMENTS,
                                       {"topic": p.topic, "partition": p.partition},
                                       ctx, now, self.core.config["controller.socket.timeout.ms"])
        else:
            p.inflight = self.core._request(REMOTE_STORE, P.GET_OBJECT,
                                       {"key": object_keys(p.topic, p.partition, aux["segment"])["epochs"]},
                                       ctx, now, self.core.socket_ms)

    def _on_aux_response(self, p: Partition, pending, message: dict, now: int) -> None:
        aux = p.aux
        if p.fetch_state != FetchState.BUILDING_AUX or aux is None:
            self.core._follower_next(p, now)
            return
        error = message.get("error")
        elo = aux["elo"]
        if pending.api == P.LIST_REMOTE_SEGMENTS:
            if error is None:
                self._adopt_remote(p, message.get("segments"))
                if elo <= p.log_start:
                    self._aux_built(p, [], now)
                    return
                aux["segment"] = covering(p.remote, elo - 1)
                if aux["segment"] is not None:
                    self.core._follower_next(p, now)
                    return
                self.core._log(f"{p.topic}-{p.partition}: remote metadata does not cover offset {elo - 1} yet")
            p.retry_at = now + self.core.backoff_ms
            return
        try:
            if error is not None:
                raise S.StorageError(f"GetObject: {error}")
            data = message.get("data")
            if not isinstance(data, (bytes, bytearray)):
                raise S.StorageError("GetObject answered without data")
            entries = S.parse_leader_epoch_checkpoint(bytes(data), f"remote {aux['segment']['id']}")
        except S.StorageError as e:
            self.core._log(f"{p.topic}-{p.partition}: epoch checkpoint of remote segment {aux['segment']['id']} "
                      f"unusable ({e}); reading the metadata again")
            aux["segment"] = None
            p.retry_at = now + self.core.backoff_ms
            return
        self._aux_built(p, entries, now)

    def _aux_built(self, p: Partition, entries: list, now: int) -> None:
        aux = p.aux
        cache = EpochCache([(e, o) for e, o in entries if o < aux["elo"]])
        cache.assign(aux["elo_epoch"], aux["elo"])
        p.epoch_cache = cache
        self.core._write_epochs(p)
        self.core._log(f"{p.topic}-{p.partition}: rebuilt epochs {cache.as_list()} up to ELO {aux['elo']}; fetching")
        p.aux = None
        p.fetch_state = FetchState.FETCHING
        self.core._follower_next(p, now)

    # ------------------------------------------------------------ responses
    def on_response(self, pending, message: dict, now: int) -> None:
        ctx = pending.ctx
        if isinstance(ctx, tuple) and ctx and ctx[0] == "rlm":
            p = self.core.partitions.get(ctx[1])
            if p is not None:
                self._on_rlm_response(p, pending, message, now)
            return
        if isinstance(ctx, tuple) and ctx and ctx[0] == "read":
            self._on_remote_read(pending, message, now)
            return
        p = self.core._follower_response_target(pending)
        if p is None:
            return
        if pending.api == P.LIST_OFFSETS:
            if message.get("error") is not None or p.aux is None:
                p.retry_at = now + self.core.backoff_ms
                return
            self._on_elo(p, message, now)
            self.core._follower_next(p, now)
        else:
            self._on_aux_response(p, pending, message, now)

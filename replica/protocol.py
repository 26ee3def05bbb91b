"""Message names, field names and error codes of the replica wire protocol.

Every frame is a JSON object (framing: ``replica/wire.py``). Requests carry
``{"api": NAME, "corr": n, ...}``; responses ``{"corr": n, "error": null | CODE, ...}``
plus the fields listed per message below. This file is the contract between the
cores (``replica/core``), the process shells and the client library
(``replica/client.py``): fields are only ever added, never renamed.

Records travel as lists ``[offset, epoch, crc, value]`` (``crc`` is
``zlib.crc32`` of the JSON encoding of ``value``, see ``record_crc``).

Messages (``->`` request fields, ``<-`` response fields besides corr/error):

Produce (client -> partition leader)
    -> topic, partition, acks (0 | 1 | "all"; -1 means "all"),
       values (list of JSON values; or ``value`` for one record),
       timeout_ms (optional, default request.timeout.ms)
    <- offset (offset of the first record), last_offset (of the last record).
       acks=0 is answered at once with offset -1 (Kafka sends no response at
       all; we answer so that a client can pipeline without special cases).
    Errors before append (definite): NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
    UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, MESSAGE_TOO_LARGE (the records
    exceed message.max.bytes), INVALID_RECORD (a value is not JSON the broker
    can write back: NaN, Infinity, 1e999).
    Errors after append (indefinite: the records are in the leader's log and
    may survive): REQUEST_TIMED_OUT (timeout, or leadership lost while waiting),
    NOT_ENOUGH_REPLICAS_AFTER_APPEND.

Fetch (consumer or follower -> partition leader)
    -> topic, partition, offset, replica_id (-1 for consumers, broker id for
       followers), max_records (default 1000), max_bytes (records' bytes, see
       record_size; followers send replica.fetch.max.bytes; capped by
       fetch.max.bytes and the frame; the first record always comes, KIP-74),
       max_wait_ms (consumers default 0; followers send
       replica.fetch.wait.max.ms), current_leader_epoch
       (optional, -1 = unchecked; era ``epoch`` fences with it)
    <- records (consumers: only below the HW; followers: up to the LEO),
       hw, log_start, leo (the leader's), leader_epoch (the leader's)
    Errors: NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE (with hw, log_start,
    leo filled in), FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION; with tiered storage a follower fetch below the
    leader's local log start gets OFFSET_MOVED_TO_TIERED_STORAGE (with
    log_start, local_log_start), a consumer fetch there is served from the
    remote store (KAFKA_STORAGE_ERROR when the store or its object fails).

ListOffsets (client -> partition leader)
    -> topic, partition, spec ("earliest" | "latest" | "earliest_local"),
       current_leader_epoch (optional)
    <- offset (earliest = log start, latest = HW, as for Kafka's read_uncommitted;
       earliest_local = the local log start, KIP-405's EARLIEST_LOCAL_TIMESTAMP),
       leader_epoch (earliest_local: the epoch of the record there)

Metadata (client -> any broker or the controller)
    -> topic (string, or null/absent for all topics)
    <- topics: {topic: {"<partition>": PARTITION_STATE}},
       brokers: {"<id>": [host, port]}, controller: [host, port] | null
    PARTITION_STATE = {"leader": id | null, "leader_epoch": e, "isr": [...],
                       "replicas": [...], "version": v}
    A broker answers from its metadata cache (which lags the controller by the
    ISR change propagation delay); the controller answers from its own state.

CreateTopic (client -> controller)
    -> topic, partitions, replication_factor, config ({} or per-topic settings,
       e.g. {"min.insync.replicas": 2})
    <- topic, partitions: {"<p>": PARTITION_STATE}
    Errors: TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, INVALID_REQUEST.

OffsetsForLeaderEpoch (follower -> partition leader; eras kip101 and epoch)
    -> topic, partition, leader_epoch (the epoch asked about),
       current_leader_epoch (the follower's known leader epoch), replica_id
    <- leader_epoch (kip101: -1; epoch: the largest epoch <= asked that the
       leader knows, -1 if none), end_offset (-1 = UNDEFINED)

PutRemoteSegment (partition leader -> controller; tiered storage, KIP-405)
    -> broker, broker_epoch, topic, partition, leader_epoch,
       segment: REMOTE_SEGMENT
    REMOTE_SEGMENT = {"id", "base", "end" (last offset, inclusive), "epochs"
       ([[epoch, start], ...] of the epochs its records span), "state"
       (COPY_SEGMENT_STARTED | COPY_SEGMENT_FINISHED | DELETE_SEGMENT_STARTED |
       DELETE_SEGMENT_FINISHED), "broker", "leader_epoch" (of the copier),
       "size" (bytes), "max_ms" (copier's clock at its newest record)}
    <- segments: the partition's REMOTE_SEGMENTs after the update
    COPY_SEGMENT_STARTED needs the current leader in its current epoch; later
    states follow the order above (a copy started may finish after a leader
    change). Errors: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
    INVALID_REQUEST (a state out of order), UNKNOWN_TOPIC_OR_PARTITION.

ListRemoteSegments (any broker or client -> controller)
    -> topic, partition
    <- segments: [REMOTE_SEGMENT, ...] in the order they were started

Remote object store (broker -> store; over HTTP in the real cluster, see
replica/remote_store.py; messages of this form inside the cores)
    PutObject -> key, data (bytes)            <- (nothing)
    GetObject -> key, range ([start, end) or absent)  <- data; NOT_FOUND
    DeleteObject -> key                       <- (nothing)
    ListObjects -> prefix                     <- keys
    Errors: NOT_FOUND, KAFKA_STORAGE_ERROR (the store failed), NETWORK_ERROR.

Register (broker -> controller)
    -> broker, host, port
    <- broker_epoch (a new number for every registration)

Heartbeat (broker -> controller)
    -> broker, broker_epoch
    <- sync: null, or {"brokers": ..., "partitions": [PARTITION_UPDATE, ...]}
       when a push to this broker is unacknowledged (LeaderAndIsr retransmission)
    Errors: STALE_BROKER_EPOCH (the session expired or is unknown: register again).

AlterIsr (partition leader -> controller; a conditional update on version)
    -> broker, broker_epoch, topic, partition, leader_epoch, isr, version
    <- leader, leader_epoch, isr, version (the controller's state after the
       call: on success the new one; on error the current one, so the leader
       can adopt it)
    Errors: INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER,
    INELIGIBLE_REPLICA (a replica to add is not alive), STALE_BROKER_EPOCH.

AlterReassignment (client -> controller; Kafka's AlterPartitionReassignments, KIP-455)
    -> topic, partition, replicas (the target set, in preference order)
    <- replicas (the assignment now: old + adding while the reassignment runs),
       target (null once complete)
    The controller adds the new replicas to the assignment at once; when every
    target replica is in the ISR, the assignment becomes the target, the ISR
    keeps only target replicas, and a leader outside the target hands over to
    the first target replica in the ISR. A broker dropped from the assignment
    stops replicating the partition (its files stay). Errors:
    UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (unknown broker, repeated or
    empty replicas).

IsrChangeNotification (partition leader -> controller)
    -> broker, partitions: [[topic, partition], ...]
    <- (nothing); the controller pushes UpdateMetadata to every live broker.

LeaderAndIsr (controller -> broker) and UpdateMetadata (controller -> broker)
    -> seq (per-broker push counter), brokers: {"<id>": [host, port]},
       partitions: [PARTITION_UPDATE, ...]
    PARTITION_UPDATE = PARTITION_STATE + {"topic", "partition", "config"}
    <- seq. A broker applies a partition update only when its version is newer
       than the one it holds. LeaderAndIsr changes roles; UpdateMetadata only
       the metadata cache.

Cluster identity (Kafka's ClusterAction)
    Every request a broker or the controller sends to another (not to the remote store) carries
    ``cluster_secret``, the secret of ``--cluster-secret-file``. Without it
    (or with another) a Fetch with a replica_id is served as a consumer's
    (below the HW; it moves neither the HW nor the ISR), and Register,
    Heartbeat, AlterIsr, IsrChangeNotification, PutRemoteSegment, LeaderAndIsr and
    UpdateMetadata are refused with CLUSTER_AUTHORIZATION_FAILED. A broker
    whose registration is refused so exits (code 2): it cannot be part of
    this cluster.

State (debug, any process)
    <- as in docs/interfaces.md: broker, era, partitions: [{topic, partition,
       role, leader, leader_epoch, leo, hw, log_start, isr, epoch_cache}]
       (the controller answers {controller: true, era, brokers, topics})

Dump (debug, broker)
    <- broker, partitions: [{topic, partition, hw, leo, log_start,
       records: [[offset, epoch, crc, value], ...]}]
"""

from __future__ import annotations

import json
import zlib

from .wire import MAX_FRAME_BYTES

# --- API names -------------------------------------------------------------
PRODUCE = "Produce"
FETCH = "Fetch"
LIST_OFFSETS = "ListOffsets"
METADATA = "Metadata"
CREATE_TOPIC = "CreateTopic"
ALTER_REASSIGNMENT = "AlterReassignment"
OFFSETS_FOR_LEADER_EPOCH = "OffsetsForLeaderEpoch"
PUT_REMOTE_SEGMENT = "PutRemoteSegment"
LIST_REMOTE_SEGMENTS = "ListRemoteSegments"
PUT_OBJECT = "PutObject"
GET_OBJECT = "GetObject"
DELETE_OBJECT = "DeleteObject"
LIST_OBJECTS = "ListObjects"
REGISTER = "Register"
HEARTBEAT = "Heartbeat"
ALTER_ISR = "AlterIsr"
ISR_CHANGE_NOTIFICATION = "IsrChangeNotification"
LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STATE = "State"
DUMP = "Dump"

BROKER_APIS = (PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSETS_FOR_LEADER_EPOCH,
               LEADER_AND_ISR, UPDATE_METADATA, STATE, DUMP)
CONTROLLER_APIS = (REGISTER, HEARTBEAT, ALTER_ISR, ISR_CHANGE_NOTIFICATION,
                   CREATE_TOPIC, METADATA, STATE, PUT_REMOTE_SEGMENT, LIST_REMOTE_SEGMENTS, ALTER_REASSIGNMENT)
STORE_APIS = (PUT_OBJECT, GET_OBJECT, DELETE_OBJECT, LIST_OBJECTS)

# --- Remote segment states (KIP-405's RemoteLogSegmentState) ------------------
COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"
SEGMENT_STATES = (COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED,
                  DELETE_SEGMENT_FINISHED)

# --- Error codes (Kafka's names) ---------------------------------------------
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
INVALID_REQUEST = "INVALID_REQUEST"
INVALID_RECORD = "INVALID_RECORD"
CLUSTER_AUTHORIZATION_FAILED = "CLUSTER_AUTHORIZATION_FAILED"
MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
UNSUPPORTED_API = "UNSUPPORTED_API"
TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
INVALID_REPLICATION_FACTOR = "INVALID_REPLICATION_FACTOR"
INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
OFFSET_MOVED_TO_TIERED_STORAGE = "OFFSET_MOVED_TO_TIERED_STORAGE"
KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
NOT_FOUND = "NOT_FOUND"
# Internal to the cores: a peer request that got no answer (timeout or lost connection).
NETWORK_ERROR = "NETWORK_ERROR"

# Errors after which a produced record may or may not be in the log.
INDEFINITE_PRODUCE_ERRORS = frozenset({REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND})

# --- Special values -----------------------------------------------------------
CONSUMER_REPLICA_ID = -1
CLUSTER_SECRET = "cluster_secret"    # field of every inter-broker request (see "Cluster identity")
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
NO_EPOCH_CHECK = -1
ACKS_ALL = "all"

ERAS = ("hw", "kip101", "epoch")


# --- Sizes ------------------------------------------------------------------------
# A record's size is the JSON of its value plus RECORD_OVERHEAD, an upper bound of
# the rest of ``[offset,epoch,crc,value],`` in a reply. message.max.bytes bounds
# the records of a produce; one record must fit in a fetch reply, envelope included.
RECORD_OVERHEAD = 48
REPLY_ENVELOPE_BYTES = 1024
MAX_FETCH_BYTES = MAX_FRAME_BYTES - REPLY_ENVELOPE_BYTES
MAX_RECORD_BYTES = MAX_FETCH_BYTES - RECORD_OVERHEAD
_SMALL_INT = 10 ** 18
_SMALL_INT_RECORD = 20 + RECORD_OVERHEAD

# Canonical value encoding, built once (json.dumps with options builds an encoder per call).
# allow_nan=False: NaN and Infinity are not JSON; the wire refuses them too.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False)


def record_crc(value) -> int:
    """CRC of a record: zlib.crc32 of the canonical JSON encoding of its value.

    Same encoding as ``replica.storage.encode_value`` (compact, sorted keys).
    Raises ValueError for a non-finite number.
    """
    return zlib.crc32(_CANONICAL.encode(value).encode("utf-8"))


def record_crc_and_size(value) -> tuple[int, int]:
    """``record_crc`` and the record's size in bytes, from one encoding."""
    text = _CANONICAL.encode(value)
    return zlib.crc32(text.encode("utf-8")), len(text) + RECORD_OVERHEAD


def record_size(value) -> int:
    """A record's size in bytes (an int costs no encoding)."""
    if type(value) is int and -_SMALL_INT < value < _SMALL_INT:
        return _SMALL_INT_RECORD
    return len(_CANONICAL.encode(value)) + RECORD_OVERHEAD

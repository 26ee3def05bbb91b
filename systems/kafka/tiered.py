"""Tiered storage (KIP-405) on Kafka 4.x: `--option tiered=true`, or a run whose
settings have `remote.storage.enable: true` (the topic setting, which a broker
refuses unless its remote log storage system is on).

- Remote storage manager: Kafka's own `LocalTieredStorage` (the storage
  module's test jar, `org.apache.kafka:kafka-storage:<v>:jar:test`, served by
  Maven Central; build/kafka/<v>/tiered/, systems/kafka/install.py), loaded
  through `remote.log.storage.manager.class.path`. It keeps each remote segment
  as plain files under `<rsm.config.dir>/kafka-tiered-storage/`:
  `<topic>-<partition>-<topic id>/<base offset:020d>-<segment id>.log` (the
  segment as the broker wrote it) and its `.index`, `.timeindex`, `.snapshot`,
  `.leader_epoch_checkpoint` files.
- One remote directory for every broker of the run, `<work dir>/remote-store`:
  network-namespace hosts share this machine's file system (docker and ssh
  hosts do not: tiered storage is refused there).
- Remote log metadata: Kafka's topic-based manager (the default
  `TopicBasedRemoteLogMetadataManager`, topic `__remote_log_metadata`), one
  partition, replicated like the run's topic.
- The broker's intervals are short (RLM task and retention checks every 500 ms)
  and its RLM thread pools small (two cores); the topic gets
  `remote.storage.enable`, a short `local.retention.ms` and small segments
  (`internal.segment.bytes`: Kafka 4 refuses segment.bytes below 1 MiB)
  unless the run sets them.

The inspector reads each replica's local log start (its first local segment),
the remote end (one past the last offset of the remote segments in the shared
directory; -1 when none) and the leader's log start (ListOffsets earliest); the
remote segments also make one more dump, `remote` (a copy of the offsets they
hold, like the replica's remote tier) for the replica diff.
"""
from __future__ import annotations

import os
import time

RSM_CLASS = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
ROOT = "kafka-tiered-storage"        # LocalTieredStorage's folder under its `dir`
TOPIC_ID_CHARS = 22                  # a topic id in the folder name: URL-safe base64 of 16 bytes
REMOTE_DIR = "remote-store"          # under the run's work directory
RLMM_READY = "Initialized topic-based RLMM resources successfully"   # TopicBasedRemoteLogMetadataManager

# Broker settings the run may override (--set / scenario settings).
BROKER_DEFAULTS = {
    "remote.log.manager.task.interval.ms": 500,
    "log.retention.check.interval.ms": 500,
    "remote.log.manager.thread.pool.size": 2,
    "remote.log.manager.copier.thread.pool.size": 1,
    "remote.log.manager.expiration.thread.pool.size": 1,
    "remote.log.reader.threads": 2,
}
# Topic settings the run may override. One record per produce request is a batch of
# 71-76 bytes here (61 bytes of batch header): 230 bytes hold three, like the model's
# 66-byte segments of three 22-byte records.
TOPIC_DEFAULTS = {
    "remote.storage.enable": True,
    "local.retention.ms": 1000,
    "internal.segment.bytes": 230,
}


def enabled(settings: dict, options) -> bool:
    return bool(getattr(options, "tiered", False)) or str(settings.get("remote.storage.enable", "")).lower() == "true"


def remote_dir(work_dir: str) -> str:
    return os.path.join(work_dir, REMOTE_DIR)


def broker_props(settings: dict, class_path: str, remote: str, replication_factor: int) -> dict:
    """The properties tiered storage adds to a broker (before the run's own settings)."""
    props: dict[str, object] = {
        "remote.log.storage.system.enable": True,
        "remote.log.storage.manager.class.name": RSM_CLASS,
        "remote.log.storage.manager.class.path": class_path,
        "rsm.config.dir": remote,
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": replication_factor,
        "rlmm.config.remote.log.metadata.topic.num.partitions": 1,
    }
    props.update({k: v for k, v in BROKER_DEFAULTS.items() if k not in settings})
    return props


def topic_defaults(topic: dict) -> dict:
    """The run's topic configs with tiered storage's defaults beneath them."""
    out = {k: v for k, v in TOPIC_DEFAULTS.items() if k not in topic and
           not (k == "internal.segment.bytes" and "segment.bytes" in topic)}
    out.update(topic)
    return out


def partition_dirs(remote: str, topic: str, key: int) -> list[str]:
    """The remote folders of a partition (one per topic id: a re-created topic gets another)."""
    root = os.path.join(remote, ROOT)
    prefix = f"{topic}-{key}-"
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return [os.path.join(root, n) for n in sorted(names)
            if n.startswith(prefix) and len(n) - len(prefix) == TOPIC_ID_CHARS]


def remote_segments(remote: str, topic: str, key: int) -> list[tuple[int, str]]:
    """(base offset, .log path) of every remote segment of a partition, by base offset
    (a segment copied twice, by two leaders, is listed twice)."""
    out = []
    for d in partition_dirs(remote, topic, key):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            base, _, rest = n.partition("-")
            if n.endswith(".log") and base.isdigit() and rest:
                out.append((int(base), os.path.join(d, n)))
    return sorted(out)


_ENDS: dict[str, int | None] = {}   # a remote segment never changes once copied: its end, by path


def segment_end(path: str, base: int) -> int | None:
    """One past the last offset of a remote segment (None: no whole batch yet)."""
    from systems.kafka.segments import _scan_ends

    if path in _ENDS:
        return _ENDS[path]
    try:
        end, _size = _scan_ends(path, base, 0)
    except (OSError, ValueError):
        return None
    if end is not None and time.time() - _mtime(path) > 2.0:   # not a copy still being written
        _ENDS[path] = end
    return end


def remote_end(remote: str, topic: str, key: int) -> int:
    """One past the last offset held in remote storage for the partition; -1 when none
    (the replica's `remote_end`)."""
    ends = [segment_end(p, b) for b, p in remote_segments(remote, topic, key)]
    ends = [e for e in ends if e is not None]
    return max(ends) if ends else -1


def remote_dump(remote: str, topic: str, keys: int) -> dict:
    """The remote tier as one more replica's dump (broker "remote"): per partition the
    records of every remote segment (a later copy of an offset wins), hw = leo = one
    past the last. A segment that cannot be read is listed under `errors`."""
    from systems.kafka.segments import _Reader

    partitions, errors = [], []
    for key in range(keys):
        records: dict[int, list] = {}
        segs = remote_segments(remote, topic, key)
        segs.sort(key=lambda s: (_mtime(s[1]), s[0]))
        for base, path in segs:
            try:
                reader = _Reader(verify_crc=True, keep_bad=False)
                reader.segment(path, last=True)
                for rec in reader.records:
                    records[rec[0]] = rec
                if reader.bad_crc or reader.torn_tail:
                    errors.append(f"{os.path.relpath(path, remote)}: bad CRC at {reader.bad_crc} "
                                  f"torn tail {reader.torn_tail}")
            except Exception as e:  # noqa: BLE001  (a torn or corrupt object: reported, never read around)
                errors.append(f"{os.path.relpath(path, remote)}: {e}")
        if records:
            end = max(records) + 1
            partitions.append({"topic": topic, "partition": key, "hw": end, "leo": end, "hw_source": "remote",
                               "log_start": min(records), "local_log_start": min(records),
                               "records": [records[o] for o in sorted(records)]})
    dump = {"broker": "remote", "partitions": partitions}
    if errors:
        dump["errors"] = errors
    return dump


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0



# -- the remote-store fault (harness.sut.RemoteTier) ------------------------------
ASIDE = ".unavailable"     # suffix of a partition's remote folder while the store is unavailable
QUOTAS = ("remote.log.manager.fetch.max.bytes.per.second", "remote.log.manager.copy.max.bytes.per.second")
SEGMENT_BYTES = 256        # about one remote segment of the tiered defaults (TOPIC_DEFAULTS)


class KafkaRemoteTier:
    """LocalTieredStorage's folder as the remote-store fault sees it. The folder is on
    this machine's file system (tiered storage runs on netns hosts only), so the
    objects are plain files here:

    - lose: delete every file of one remote segment (`.log`, indexes, snapshot,
      leader-epoch checkpoint);
    - unavailable: each partition's remote folder of the run's topic is moved aside
      and a plain file put in its place, so LocalTieredStorage's copies, fetches and
      deletes fail (the root folder stays: a broker restarted meanwhile must still
      start); undone by moving them back;
    - slow: LocalTieredStorage has no delay of its own, so the brokers' remote fetch
      and copy quotas (KIP-956, dynamic cluster-wide settings) are set to about one
      segment per `seconds`: the broker throttles its remote reads and copies, which a
      reader below the local log start sees as a slow store.
    """

    def __init__(self, db, topic: str, broker_ids: list[int]):
        self.db = db
        self.topic = topic
        self.broker_ids = broker_ids

    @property
    def _root(self) -> str:
        return os.path.join(self.db.remote_dir(), ROOT)

    def _folders(self) -> list[str]:
        try:
            names = os.listdir(self._root)
        except OSError:
            return []
        return sorted(n for n in names if n.startswith(f"{self.topic}-"))

    def segments(self) -> list[dict]:
        found = []
        for folder in self._folders():
            name = folder[:-len(ASIDE)] if folder.endswith(ASIDE) else folder
            key = name[len(self.topic) + 1:].partition("-")[0]     # <topic>-<key>-<topic id>
            path = os.path.join(self._root, folder)
            if not key.isdigit() or not os.path.isdir(path):
                continue
            for n in os.listdir(path):
                base, _, rest = n.partition("-")
                if n.endswith(".log") and base.isdigit() and rest:
                    found.append({"key": int(key), "base": int(base), "name": os.path.join(folder, n)})
        return sorted(found, key=lambda s: (s["key"], s["base"], s["name"]))

    def lose(self, segment: dict) -> dict:
        path = os.path.join(self._root, segment["name"])
        end = segment_end(path, segment["base"])
        stem = os.path.basename(path)[:-len(".log")]
        folder = os.path.dirname(path)
        removed = []
        for n in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if n.startswith(stem + "."):
                os.remove(os.path.join(folder, n))
                removed.append(os.path.join(os.path.basename(folder), n))
        return {"key": segment["key"], "base": segment["base"], "end": None if end is None else end - 1,
                "objects": removed}

    def set_available(self, available: bool) -> dict:
        moved = []
        for folder in self._folders():
            path = os.path.join(self._root, folder)
            if available and folder.endswith(ASIDE):
                live = path[:-len(ASIDE)]
                if os.path.isfile(live):
                    os.remove(live)
                os.rename(path, live)
                moved.append(folder[:-len(ASIDE)])
            elif not available and not folder.endswith(ASIDE) and os.path.isdir(path):
                os.rename(path, path + ASIDE)
                open(path, "w").close()
                moved.append(folder)
        how = "partition folders back" if available else \
            "each partition's remote folder replaced by a file: LocalTieredStorage's operations fail"
        return {"available": available, "partitions": moved, "how": how}

    def set_delay(self, seconds: float) -> dict:
        from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                           ResourceType)

        rate = max(1, int(SEGMENT_BYTES / seconds)) if seconds > 0 else None
        op = AlterConfigOpType.SET if rate else AlterConfigOpType.DELETE
        entries = [ConfigEntry(q, str(rate or ""), incremental_operation=op) for q in QUOTAS]
        bootstrap = ",".join(f"{h}:{p}" for h, p in self.db.endpoints())
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        # Per broker (librdkafka cannot name the cluster-wide default); a broker that is
        # down keeps its old value and is named in the answer.
        missed = []
        for broker in self.broker_ids:   # one broker per call (librdkafka's rule)
            resource = ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=entries)
            try:
                for f in admin.incremental_alter_configs([resource]).values():
                    f.result(timeout=15)
            except Exception as e:  # noqa: BLE001  (confluent_kafka's KafkaException, a timeout)
                missed.append(f"broker {resource.name}: {e}")
        how = f"remote fetch and copy quotas (KIP-956) {rate} bytes/s on each broker" if rate else \
            "remote quotas back to their defaults"
        return {"delay_s": seconds, "how": how, **({"missed": missed} if missed else {})}

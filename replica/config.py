"""Settings of brokers and the controller: Kafka's names and Kafka's defaults.

Sources, lowest precedence first: the defaults below, a JSON file
(``--config FILE.json``, an object of name -> value), then ``--set key=value``
flags. Unknown names and ill-typed values are rejected with a one-line
``ConfigError`` that names the key.

Era-dependent defaults (``replica.core.eras``, rule
``replica_lag_time_max_ms``): ``replica.lag.time.max.ms`` is 10000 in the
``hw`` and ``kip101`` eras (Kafka 0.10.2 / 0.11.0) and 30000 in ``epoch``
(Kafka 2.6, KIP-537). Everything else has one default. ``broker.session.timeout.ms`` and
``broker.heartbeat.interval.ms`` take KRaft's defaults (our controller plays
ZooKeeper's role; 9000 ms sits between ZooKeeper's 6000 in 0.10 and 18000 in 2.6).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

NEVER = 9223372036854775807  # Kafka's Long.MAX_VALUE: "never" for flush.messages / flush.ms


class ConfigError(ValueError):
    """A bad setting; the message is one line and names the key."""


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type            # int or bool
    default: Any
    doc: str
    minimum: int | None = 0


SETTINGS: dict[str, Setting] = {s.name: s for s in [
    Setting("replica.lag.time.max.ms", int, None,
            "a follower that has not caught up for this long leaves the ISR "
            "(default 10000 in eras hw/kip101, 30000 in epoch)", 1),
    Setting("replica.fetch.wait.max.ms", int, 500,
            "how long the leader parks a follower fetch that finds no new data"),
    Setting("replica.fetch.backoff.ms", int, 1000,
            "pause of a follower after a fetch error"),
    Setting("replica.fetch.max.records", int, 1000,
            "records per follower fetch (besides the byte bound, replica.fetch.max.bytes)", 1),
    Setting("replica.fetch.max.bytes", int, 1048576,
            "bytes of records per follower fetch reply; the first record always comes (KIP-74)", 1),
    Setting("fetch.max.bytes", int, 57671680,
            "bytes of records per fetch reply at most, whatever a fetch asks for (capped by the 8 MiB frame)", 1),
    Setting("message.max.bytes", int, 1048588,
            "bytes of the records of one produce (JSON of each value + 48); larger ones get MESSAGE_TOO_LARGE", 1),
    Setting("queued.max.request.bytes", int, 64 << 20,
            "receive-buffer bytes held for partial requests over all connections before reading pauses "
            "(Kafka's default is unbounded)", 1),
    Setting("connections.max.idle.ms", int, 600000,
            "a connection that sent part of a request and nothing for this long is closed "
            "(Kafka closes any idle connection; ours may idle between requests)", 1),
    Setting("replica.socket.timeout.ms", int, 30000,
            "a follower request (beyond its wait time) unanswered for this long is retried", 1),
    Setting("replica.high.watermark.checkpoint.interval.ms", int, 5000,
            "period of the replication-offset-checkpoint (HW) write", 1),
    Setting("broker.session.timeout.ms", int, 9000,
            "the controller declares a broker dead after this long without a heartbeat", 1),
    Setting("broker.heartbeat.interval.ms", int, 2000,
            "period of a broker's heartbeat to the controller", 1),
    Setting("controller.socket.timeout.ms", int, 30000,
            "a broker->controller request unanswered for this long is retried", 1),
    Setting("request.timeout.ms", int, 30000,
            "default timeout of an acks=all produce waiting for the HW", 1),
    Setting("min.insync.replicas", int, 1,
            "acks=all produces need at least this many replicas in the ISR", 1),
    Setting("unclean.leader.election.enable", bool, False,
            "elect a live replica outside the ISR when no ISR member is live"),
    Setting("flush.messages", int, NEVER,
            "fsync a partition after this many unflushed records (default never)", 1),
    Setting("flush.ms", int, NEVER,
            "fsync a partition when its oldest unflushed record is this old (default never)", 1),
    Setting("isr.change.propagation.interval.ms", int, 2500,
            "how often a leader checks for ISR changes to propagate"),
    Setting("isr.change.propagation.blackout.ms", int, 5000,
            "propagate once the last ISR change is at least this old"),
    Setting("isr.change.propagation.max.interval.ms", int, 60000,
            "... or once the last propagation is at least this old"),
    Setting("num.partitions", int, 1, "partitions of a topic created without a count", 1),
    Setting("default.replication.factor", int, 1, "replication factor when none is given", 1),
    Setting("log.segment.bytes", int, 1 << 30, "segment file size before a roll", 1),
    # --- segments, retention and tiered storage (KIP-405; see replica/TIERED.md)
    Setting("log.roll.ms", int, 7 * 24 * 3600 * 1000,
            "roll the active segment once its first record is this old (checked at append)", 1),
    Setting("retention.ms", int, 7 * 24 * 3600 * 1000,
            "delete (remote or local) segments whose newest record is older (-1: keep forever)", -1),
    Setting("retention.bytes", int, -1,
            "delete the oldest segments while the whole log is larger (-1: no limit)", -1),
    Setting("local.retention.ms", int, -2,
            "with remote storage: delete local segments already copied remotely and this old "
            "(-2: as retention.ms)", -2),
    Setting("local.retention.bytes", int, -2,
            "with remote storage: delete copied local segments while the local log is larger "
            "(-2: as retention.bytes)", -2),
    Setting("log.retention.check.interval.ms", int, 300000, "period of the retention check", 1),
    Setting("remote.storage.enable", bool, False,
            "tier rolled segments to the remote store (brokers need --remote-store HOST:PORT)"),
    Setting("remote.log.manager.task.interval.ms", int, 30000,
            "period of the remote log manager task (copy, remote retention, metadata refresh)", 1),
    Setting("remote.log.follower.skip.aux.state", bool, False,
            "a deliberate BUG for the harness to find (off by default): on OFFSET_MOVED_TO_TIERED_STORAGE "
            "the follower skips BuildingRemoteLogAux and fetches from the leader's earliest local "
            "offset with the leader-epoch cache it has"),
]}


# Settings a topic may override (CreateTopic's config).
TOPIC_SETTINGS = ("min.insync.replicas", "unclean.leader.election.enable",
                  "flush.messages", "flush.ms", "log.segment.bytes", "log.roll.ms", "retention.ms",
                  "retention.bytes", "local.retention.ms", "local.retention.bytes", "remote.storage.enable")


def coerce(name: str, value: Any) -> Any:
    """Check and convert one value (strings from --set are parsed)."""
    setting = SETTINGS.get(name)
    if setting is None:
        raise ConfigError(f"unknown setting {name!r} (known: see replica/config.py)")
    if isinstance(value, str):
        text = value.strip()
        if setting.kind is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ConfigError(f"setting {name!r} must be true or false, got {value!r}")
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"setting {name!r} must be an integer, got {value!r}") from None
    if setting.kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"setting {name!r} must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"setting {name!r} must be an integer, got {value!r}")
    if setting.minimum is not None and value < setting.minimum:
        raise ConfigError(f"setting {name!r} must be >= {setting.minimum}, got {value}")
    return value


def defaults(era: str) -> dict[str, Any]:
    from .core.eras import rules  # the era rules table (imported late: the core imports this module)

    try:
        row = rules(era)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    values = {name: s.default for name, s in SETTINGS.items()}
    values["replica.lag.time.max.ms"] = row.replica_lag_time_max_ms
    return values


def build(era: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults for the era with the given overrides applied and checked."""
    values = defaults(era)
    for name, value in (overrides or {}).items():
        values[name] = coerce(name, value)
    from .protocol import MAX_RECORD_BYTES    # the frame limit bounds every record
    if values["message.max.bytes"] > MAX_RECORD_BYTES:
        raise ConfigError(f"setting 'message.max.bytes' must be <= {MAX_RECORD_BYTES} (a record and its "
                          f"fetch reply must fit in one frame), got {values['message.max.bytes']}")
    return values


def parse_set(items: Iterable[str]) -> dict[str, str]:
    """``["a.b=1", ...]`` -> ``{"a.b": "1"}``."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r} must look like key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


def load(era: str, path: str | None = None, sets: Iterable[str] = ()) -> dict[str, Any]:
    """The effective settings from an optional JSON file and --set flags."""
    merged: dict[str, Any] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
        except ValueError as e:
            raise ConfigError(f"config file {path} is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a JSON object of setting -> value")
        merged.update(data)
    merged.update(parse_set(sets))
    return build(era, merged)


def topic_config(broker_config: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A topic's effective settings: the broker's, overridden by the topic's own."""
    values = dict(broker_config)
    for name, value in (overrides or {}).items():
        if name not in TOPIC_SETTINGS:
            raise ConfigError(f"setting {name!r} cannot be set per topic (allowed: {', '.join(TOPIC_SETTINGS)})")
        values[name] = coerce(name, value)
    return values

"""The controller core: the metadata authority (ZooKeeper plus Kafka's controller).

Inputs and outputs as for ``BrokerCore`` (``start``, ``on_request``,
``on_response``, ``on_peer_failed``, ``on_timer``). It keeps, per partition,
``{replicas, leader, leader_epoch, isr, version}``; ``version`` grows by one on
every change (ZooKeeper's zkVersion), ``leader_epoch`` on every leader change
(including to "no leader"). A broker that registers again while its session
is alive (a quick restart) keeps its ISR memberships (the KIP-101 seed
scenarios assume this), unless the era's rule ``bounced_broker_fails``
(KIP-380 broker epochs, "bounced broker"; ``replica.core.eras``) handles it as
a failure followed by a start. Every change is persisted (``Persist``) and pushed
to the live brokers (``LeaderAndIsr``); a push that is not acknowledged is
repeated in the next heartbeat answer (``sync``), so a broker behind a lossy
link still converges.
"""

from __future__ import annotations

from typing import Any

from .. import config as cfg
from .. import protocol as P
from .actions import Log, Persist, Reply, Send, SetTimer
from .eras import rules
from .validate import BadRequest, dispatch_request, from_cluster, get_int, get_str


# APIs only the cluster's brokers may call (Kafka's ClusterAction); clients keep
# CreateTopic, Metadata, State and ListRemoteSegments.
_BROKER_ONLY = frozenset({P.REGISTER, P.HEARTBEAT, P.ALTER_ISR, P.ISR_CHANGE_NOTIFICATION,
                          P.PUT_REMOTE_SEGMENT})


class ControllerCore:
    def __init__(self, era: str, config: dict, address: list | None = None, cluster_secret: str | None = None):
        self.rules = rules(era)          # ValueError for an unknown era
        self.era = era
        self.config = dict(config)
        self.address = address
        self.cluster_secret = cluster_secret   # asked of the brokers' requests, carried by our pushes
        self.brokers: dict[int, dict] = {}   # id -> {host, port, epoch, alive, deadline, sent, acked}
        self.topics: dict[str, dict] = {}    # name -> {"config": {}, "partitions": {p: state}}
        self.next_broker_epoch = 1
        self._corr = 0
        self._timer_at: int | None = None
        self._out: list = []
        self._handlers = {
            P.REGISTER: self._on_register, P.HEARTBEAT: self._on_heartbeat,
            P.ALTER_ISR: self._on_alter_isr, P.ISR_CHANGE_NOTIFICATION: self._on_isr_change,
            P.CREATE_TOPIC: self._on_create_topic, P.METADATA: self._on_metadata,
            P.ALTER_REASSIGNMENT: self._on_alter_reassignment,
            P.STATE: self._on_state,
            P.PUT_REMOTE_SEGMENT: self._on_put_remote_segment,
            P.LIST_REMOTE_SEGMENTS: self._on_list_remote_segments,
        }
        # Remote log metadata (KIP-405's RLMM, strongly consistent like its topic):
        # (topic, partition) -> [REMOTE_SEGMENT, ...] in the order copies started.
        self.remote: dict[tuple[str, int], list] = {}

    # ------------------------------------------------------------------ inputs
    def start(self, now: int, persisted: dict | None = None) -> list:
        """Start, with the metadata persisted by an earlier run (if any). Known
        brokers get a fresh session timeout to heartbeat again."""
        if persisted:
            self.next_broker_epoch = int(persisted.get("next_broker_epoch", 1))
            for bid, b in persisted.get("brokers", {}).items():
                self.brokers[int(bid)] = {"host": b["host"], "port": b["port"], "epoch": b["epoch"],
                                          "alive": True, "deadline": now + self._session_ms(),
                                          "sent": 0, "acked": 0}
            for name, t in persisted.get("topics", {}).items():
                self.topics[name] = {"config": dict(t.get("config", {})),
                                     "partitions": {int(p): dict(s) for p, s in t["partitions"].items()}}
                for p, segments in t.get("remote", {}).items():
                    self.remote[(name, int(p))] = [dict(x) for x in segments]
        return self._finish(now)

    def on_request(self, conn: Any, message: dict, now: int) -> list:
        if message.get("api") in _BROKER_ONLY and not from_cluster(message, self.cluster_secret):
            self._reply(conn, message.get("corr"), P.CLUSTER_AUTHORIZATION_FAILED,
                        message="only the cluster's brokers may call this")
            return self._finish(now)
        dispatch_request(self._handlers, self._reply, conn, message, now)
        return self._finish(now)

    def on_response(self, peer: Any, message: dict, now: int) -> list:
        b = self.brokers.get(peer)
        seq = message.get("seq") if isinstance(message, dict) else None
        if b is not None and isinstance(seq, int) and message.get("error") is None:
            b["acked"] = max(b["acked"], min(seq, b["sent"]))
        return self._finish(now)

    def on_peer_failed(self, peer: Any, now: int) -> list:
        return self._finish(now)

    def on_connection_closed(self, conn: Any, now: int) -> list:
        return self._finish(now)

    def on_timer(self, now: int) -> list:
        self._timer_at = None
        # Mark every expired broker dead first, so no election picks one of them;
        # then handle the failures in broker id order.
        expired = [bid for bid in sorted(self.brokers)
                   if self.brokers[bid]["alive"] and self.brokers[bid]["deadline"] <= now]
        for bid in expired:
            self._log(f"broker {bid} session expired")
            self.brokers[bid]["alive"] = False
        for bid in expired:
            self._broker_failed(bid, now)
        return self._finish(now)

    # ---------------------------------------------------------------- queries
    def partition_state(self, topic: str, partition: int) -> dict:
        return self.topics[topic]["partitions"][partition]

    def live_brokers(self) -> list[int]:
        return sorted(b for b, s in self.brokers.items() if s["alive"])

    # ---------------------------------------------------------------- helpers
    def _session_ms(self) -> int:
        return self.config["broker.session.timeout.ms"]

    def _finish(self, now: int) -> list:
        deadlines = [b["deadline"] for b in self.brokers.values() if b["alive"]]
        wake = min(deadlines) if deadlines else None
        if wake is not None and wake != self._timer_at:
            self._timer_at = wake
            self._out.append(SetTimer(max(wake, now)))
        out, self._out = self._out, []
        return out

    def _reply(self, conn: Any, corr: Any, error: str | None = None, **fields) -> None:
        message = {"corr": corr, "error": error}
        message.update(fields)
        self._out.append(Reply(conn, message))

    def _log(self, text: str) -> None:
        self._out.append(Log(f"controller: {text}"))

    def _alive(self, bid: int) -> bool:
        b = self.brokers.get(bid)
        return b is not None and b["alive"]

    def _update(self, topic: str, partition: int) -> dict:
        s = self.topics[topic]["partitions"][partition]
        return {"topic": topic, "partition": partition, "leader": s["leader"],
                "leader_epoch": s["leader_epoch"], "isr": list(s["isr"]), "replicas": list(s["replicas"]),
                "version": s["version"], "config": dict(self.topics[topic]["config"])}

    def _all_updates(self) -> list:
        return [self._update(t, p) for t in sorted(self.topics) for p in sorted(self.topics[t]["partitions"])]

    def _broker_addresses(self) -> dict:
        return {str(b): [s["host"], s["port"]] for b, s in sorted(self.brokers.items())}

    def _persist(self) -> None:
        self._out.append(Persist({
            "next_broker_epoch": self.next_broker_epoch,
            "brokers": {str(b): {"host": s["host"], "port": s["port"], "epoch": s["epoch"]}
                        for b, s in self.brokers.items()},
            "topics": {n: {"config": t["config"],
                           "partitions": {str(p): dict(s) for p, s in t["partitions"].items()},
                           "remote": {str(p): [dict(x) for x in self.remote[(n, p)]]
                                      for p in t["partitions"] if self.remote.get((n, p))}}
                       for n, t in self.topics.items()}}))

    def _push(self, changed: list[tuple[str, int]], api: str = P.LEADER_AND_ISR) -> None:
        """Send the changed partition states to every live broker."""
        if not changed:
            return
        updates = [self._update(t, p) for t, p in changed]
        for bid in self.live_brokers():
            self._push_to(bid, updates, api)

    def _push_to(self, bid: int, updates: list, api: str = P.LEADER_AND_ISR) -> None:
        b = self.brokers[bid]
        b["sent"] += 1
        self._corr += 1
        message = {"api": api, "corr": self._corr, "seq": b["sent"],
                   "brokers": self._broker_addresses(), "partitions": updates}
        if self.cluster_secret is not None:
            message[P.CLUSTER_SECRET] = self.cluster_secret
        self._out.append(Send(bid, message))

    def _set(self, s: dict, leader: Any, isr: list) -> None:
        if leader != s["leader"]:
            s["leader_epoch"] += 1
        s["leader"] = leader
        s["isr"] = list(isr)
        s["version"] += 1

    def _elect(self, topic: str, s: dict, unclean_ok: bool) -> tuple[Any, list] | None:
        """(leader, isr) by Kafka's rule, or None when nobody can lead."""
        for r in s["replicas"]:
            if r in s["isr"] and self._alive(r):
                return r, s["isr"]
        if unclean_ok:
            for r in s["replicas"]:
                if self._alive(r):
                    self._log(f"{topic}: unclean election of {r} (isr was {s['isr']})")
                    return r, [r]
        return None

    def _unclean(self, topic: str) -> bool:
        return bool(cfg.topic_config(self.config, self.topics[topic]["config"])["unclean.leader.election.enable"])

    def _broker_failed(self, bid: int, now: int) -> None:
        changed = []
        for topic in sorted(self.topics):
            for part, s in sorted(self.topics[topic]["partitions"].items()):
                if bid not in s["isr"] and s["leader"] != bid:
                    continue
                isr = [r for r in s["isr"] if r != bid] or list(s["isr"])
                leader = s["leader"]
                if leader == bid or leader is None:
                    elected = self._elect(topic, dict(s, isr=isr), self._unclean(topic))
                    leader, isr = elected if elected else (None, isr)
                if leader != s["leader"] or isr != s["isr"]:
                    self._set(s, leader, isr)
                    self._log(f"{topic}-{part}: leader {s['leader']} epoch {s['leader_epoch']} "
                              f"isr {s['isr']} after broker {bid} died")
                    changed.append((topic, part))
        if changed:
            self._persist()
            self._push(changed)

    def _elect_offline(self, now: int) -> list:
        changed = []
        for topic in sorted(self.topics):
            for part, s in sorted(self.topics[topic]["partitions"].items()):
                if s["leader"] is not None:
                    continue
                elected = self._elect(topic, s, self._unclean(topic))
                if elected:
                    self._set(s, elected[0], elected[1])
                    self._log(f"{topic}-{part}: elected {s['leader']} epoch {s['leader_epoch']} isr {s['isr']}")
                    changed.append((topic, part))
        return changed

    # ------------------------------------------------------------- requests
    def _on_register(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        bid = get_int(message, "broker", minimum=0)
        host = get_str(message, "host")
        port = get_int(message, "port", minimum=0)
        epoch = self.next_broker_epoch
        self.next_broker_epoch += 1
        was_alive = self._alive(bid)
        if was_alive and self.rules.bounced_broker_fails:
            # Kafka 2.x (KIP-380): a registration with a new broker epoch while the old
            # session lives means the broker bounced: handle its failure first, so it
            # leaves the ISRs and its partitions get a new leader and epoch.
            self._log(f"broker {bid} bounced")
            self.brokers[bid]["alive"] = False
            self._broker_failed(bid, now)
        self.brokers[bid] = {"host": host, "port": port, "epoch": epoch, "alive": True,
                             "deadline": now + self._session_ms(), "sent": 0, "acked": 0}
        self._log(f"broker {bid} registered ({'reconnect' if was_alive and not self.rules.bounced_broker_fails else 'up'}) "
                  f"at {host}:{port}, "
                  f"epoch {epoch}")
        changed = self._elect_offline(now)
        self._persist()
        self._reply(conn, corr, None, broker_epoch=epoch)
        self._push(changed)
        self._push_to(bid, self._all_updates())

    def _on_heartbeat(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        bid = get_int(message, "broker")
        epoch = get_int(message, "broker_epoch")
        b = self.brokers.get(bid)
        if b is None or not b["alive"] or b["epoch"] != epoch:
            self._reply(conn, corr, P.STALE_BROKER_EPOCH)
            return
        b["deadline"] = now + self._session_ms()
        seq = message.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            b["acked"] = max(b["acked"], min(seq, b["sent"]))
        sync = None
        if b["acked"] < b["sent"]:
            sync = {"seq": b["sent"], "brokers": self._broker_addresses(), "partitions": self._all_updates()}
        self._reply(conn, corr, None, sync=sync)

    def _on_alter_isr(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        bid = get_int(message, "broker")
        topic = get_str(message, "topic")
        part = get_int(message, "partition")
        leader_epoch = get_int(message, "leader_epoch")
        version = get_int(message, "version")
        isr = message.get("isr")
        if not isinstance(isr, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in isr):
            raise BadRequest("field 'isr' must be a list of broker ids")
        s = self.topics.get(topic, {}).get("partitions", {}).get(part)
        if s is None:
            self._reply(conn, corr, P.UNKNOWN_TOPIC_OR_PARTITION)
            return
        current = {"leader": s["leader"], "leader_epoch": s["leader_epoch"], "isr": list(s["isr"]),
                   "version": s["version"]}
        b = self.brokers.get(bid)
        if b is None or not b["alive"] or b["epoch"] != message.get("broker_epoch"):
            error = P.STALE_BROKER_EPOCH
        elif s["leader"] != bid:
            error = P.NOT_LEADER_OR_FOLLOWER
        elif leader_epoch != s["leader_epoch"]:
            error = P.FENCED_LEADER_EPOCH
        elif version != s["version"]:
            error = P.INVALID_UPDATE_VERSION
        elif (bid not in isr or len(set(isr)) != len(isr)
              or any(r not in s["replicas"] for r in isr)):
            error = P.INVALID_REQUEST
        elif any(r not in s["isr"] and not self._alive(r) for r in isr):
            error = P.INELIGIBLE_REPLICA
        elif self.rules.isr_broker_epochs and self._stale_incarnation(s, isr, message.get("broker_epochs")):
            error = P.INELIGIBLE_REPLICA
        else:
            error = None
        if error is not None:
            self._reply(conn, corr, error, **current)
            return
        old = s["isr"]
        self._set(s, s["leader"], isr)
        self._log(f"{topic}-{part}: AlterIsr by {bid}: {old} -> {s['isr']} (version {s['version']})")
        self._persist()
        self._reply(conn, corr, None, leader=s["leader"], leader_epoch=s["leader_epoch"],
                    isr=list(s["isr"]), version=s["version"])
        if self._complete_reassignment(topic, part):
            self._persist()
            self._push([(topic, part)])

    def _stale_incarnation(self, s: dict, isr: list, epochs) -> bool:
        """KIP-903: a replica the request adds, whose broker epoch (from the fetch the leader
        saw) is not the one it registered with last, or is missing: the request is about an
        earlier incarnation (before a replaced disk), whose log the new one may not have."""
        epochs = epochs if isinstance(epochs, dict) else {}
        for r in isr:
            if r in s["isr"]:
                continue
            seen = epochs.get(str(r))
            if seen != self.brokers[r]["epoch"]:
                self._log(f"AlterIsr: replica {r} has broker epoch {self.brokers[r]['epoch']}, the request "
                          f"saw {seen}: ineligible")
                return True
        return False

    def _on_alter_reassignment(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        """KIP-455's reassignment: the target's new replicas join the assignment now; the
        assignment becomes the target once they are all in the ISR (_complete_reassignment)."""
        topic = get_str(message, "topic")
        part = get_int(message, "partition")
        target = message.get("replicas")
        s = self.topics.get(topic, {}).get("partitions", {}).get(part)
        if s is None:
            self._reply(conn, corr, P.UNKNOWN_TOPIC_OR_PARTITION)
            return
        if (not isinstance(target, list) or not target or len(set(target)) != len(target)
                or not all(isinstance(r, int) and not isinstance(r, bool) and r in self.brokers for r in target)):
            raise BadRequest("field 'replicas' must be a non-empty list of distinct registered broker ids")
        adding = [r for r in target if r not in s["replicas"]]
        s["target"] = list(target)
        if adding or target != s["replicas"]:
            s["replicas"] = s["replicas"] + adding
            self._set(s, s["leader"], s["isr"])
            self._log(f"{topic}-{part}: reassignment to {target}: replicas now {s['replicas']}")
        self._complete_reassignment(topic, part)
        self._persist()
        self._push([(topic, part)])
        self._reply(conn, corr, None, replicas=list(s["replicas"]), target=s.get("target"))

    def _complete_reassignment(self, topic: str, part: int) -> bool:
        """The target's replicas all in the ISR: the assignment becomes the target (its order),
        the ISR keeps only them, a leader outside it hands over. -> whether it completed."""
        s = self.topics[topic]["partitions"][part]
        target = s.get("target")
        if not target or any(r not in s["isr"] for r in target):
            return False
        isr = [r for r in s["isr"] if r in target]
        leader = s["leader"]
        if leader not in target:
            leader = next((r for r in target if r in isr and self._alive(r)), None)
        s["replicas"] = list(target)
        del s["target"]
        self._set(s, leader, isr)
        self._log(f"{topic}-{part}: reassignment complete: replicas {s['replicas']} leader {s['leader']} "
                  f"epoch {s['leader_epoch']} isr {s['isr']}")
        return True

    def _on_isr_change(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        parts = message.get("partitions")
        if not isinstance(parts, list):
            raise BadRequest("field 'partitions' must be a list of [topic, partition]")
        changed = []
        for item in parts:
            if (isinstance(item, list) and len(item) == 2 and item[0] in self.topics
                    and item[1] in self.topics[item[0]]["partitions"]):
                changed.append((item[0], item[1]))
        self._reply(conn, corr, None)
        self._push(changed, P.UPDATE_METADATA)

    def _on_create_topic(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        topic = get_str(message, "topic")
        count = get_int(message, "partitions", default=self.config["num.partitions"], minimum=1)
        rf = get_int(message, "replication_factor", default=self.config["default.replication.factor"], minimum=1)
        conf = message.get("config") or {}
        if not isinstance(conf, dict):
            raise BadRequest("field 'config' must be an object")
        if not topic or "/" in topic or topic.strip() != topic:
            raise BadRequest("field 'topic' must be a non-empty name without '/' or spaces")
        try:
            cfg.topic_config(self.config, conf)
        except cfg.ConfigError as e:
            raise BadRequest(str(e)) from None
        if topic in self.topics:
            self._reply(conn, corr, P.TOPIC_ALREADY_EXISTS)
            return
        live = self.live_brokers()
        if rf > len(live):
            self._reply(conn, corr, P.INVALID_REPLICATION_FACTOR,
                        message=f"replication factor {rf} > {len(live)} live brokers")
            return
        n = len(live)
        parts = {}
        for p in range(count):
            replicas = [live[(p + i) % n] for i in range(rf)]
            parts[p] = {"replicas": replicas, "leader": replicas[0], "leader_epoch": 0,
                        "isr": list(replicas), "version": 0}
        self.topics[topic] = {"config": dict(conf), "partitions": parts}
        self._log(f"created topic {topic}: {count} partitions, replication factor {rf}")
        self._persist()
        self._reply(conn, corr, None, topic=topic,
                    partitions={str(p): self._update(topic, p) for p in parts})
        self._push([(topic, p) for p in parts])

    def _on_metadata(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        topic = message.get("topic")
        if topic is not None and not isinstance(topic, str):
            raise BadRequest("field 'topic' must be a string or null")
        topics = {}
        for name in sorted(self.topics):
            if topic is None or name == topic:
                topics[name] = {str(p): {k: v for k, v in self._update(name, p).items()
                                         if k in ("leader", "leader_epoch", "isr", "replicas", "version")}
                                for p in sorted(self.topics[name]["partitions"])}
        live = {str(b): [s["host"], s["port"]] for b, s in sorted(self.brokers.items()) if s["alive"]}
        self._reply(conn, corr, None, topics=topics, brokers=live, controller=self.address)

    def _on_put_remote_segment(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        """A state change of one remote segment, checked and persisted before the answer."""
        bid = get_int(message, "broker")
        topic = get_str(message, "topic")
        part = get_int(message, "partition")
        leader_epoch = get_int(message, "leader_epoch")
        seg = _check_segment(message.get("segment"))
        s = self.topics.get(topic, {}).get("partitions", {}).get(part)
        if s is None:
            self._reply(conn, corr, P.UNKNOWN_TOPIC_OR_PARTITION)
            return
        segments = self.remote.setdefault((topic, part), [])
        known = next((x for x in segments if x["id"] == seg["id"]), None)
        if seg["state"] == P.COPY_SEGMENT_STARTED or seg["state"] == P.DELETE_SEGMENT_STARTED:
            # Only the current leader starts a copy or a deletion (KIP-405: the RLM of the leader).
            if s["leader"] != bid:
                self._reply(conn, corr, P.NOT_LEADER_OR_FOLLOWER, segments=segments)
                return
            if leader_epoch != s["leader_epoch"]:
                self._reply(conn, corr, P.FENCED_LEADER_EPOCH, segments=segments)
                return
        order = P.SEGMENT_STATES.index
        if known is None:
            if seg["state"] != P.COPY_SEGMENT_STARTED:
                raise BadRequest(f"segment {seg['id']} is unknown; its first state must be COPY_SEGMENT_STARTED")
            segments.append(seg)
        else:
            if order(seg["state"]) != order(known["state"]) + 1:
                raise BadRequest(f"segment {seg['id']}: {known['state']} cannot become {seg['state']}")
            known.update(state=seg["state"])
        self._log(f"{topic}-{part}: remote segment {seg['id']} ({seg['base']}..{seg['end']}) {seg['state']} "
                  f"by broker {bid}")
        self._persist()
        self._reply(conn, corr, None, segments=[dict(x) for x in segments])

    def _on_list_remote_segments(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        topic = get_str(message, "topic")
        part = get_int(message, "partition")
        if part not in self.topics.get(topic, {}).get("partitions", {}):
            self._reply(conn, corr, P.UNKNOWN_TOPIC_OR_PARTITION)
            return
        self._reply(conn, corr, None, segments=[dict(x) for x in self.remote.get((topic, part), [])])

    def remote_segments(self, topic: str, partition: int) -> list:
        return [dict(x) for x in self.remote.get((topic, partition), [])]

    def _on_state(self, conn: Any, corr: Any, message: dict, now: int) -> None:
        self._reply(conn, corr, None, controller=True, era=self.era,
                    remote={f"{t}-{p}": [dict(x) for x in segs] for (t, p), segs in sorted(self.remote.items())},
                    brokers={str(b): {"alive": s["alive"], "epoch": s["epoch"]}
                             for b, s in sorted(self.brokers.items())},
                    topics={n: {str(p): self._update(n, p) for p in sorted(t["partitions"])}
                            for n, t in sorted(self.topics.items())})


def _check_segment(seg: Any) -> dict:
    """Validate a REMOTE_SEGMENT (protocol.py) from a leader."""
    if not isinstance(seg, dict):
        raise BadRequest("field 'segment' must be an object")
    out = {"id": get_str(seg, "id"), "base": get_int(seg, "base", minimum=0),
           "end": get_int(seg, "end", minimum=0), "state": get_str(seg, "state"),
           "broker": get_int(seg, "broker"), "leader_epoch": get_int(seg, "leader_epoch"),
           "size": get_int(seg, "size", minimum=0), "max_ms": get_int(seg, "max_ms", default=0)}
    if out["state"] not in P.SEGMENT_STATES:
        raise BadRequest(f"state must be one of {', '.join(P.SEGMENT_STATES)}")
    if out["end"] < out["base"]:
        raise BadRequest("end must be >= base")
    epochs = seg.get("epochs")
    if not isinstance(epochs, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in e)
            for e in epochs):
        raise BadRequest("epochs must be a list of [epoch, start_offset]")
    out["epochs"] = [list(e) for e in epochs]
    return out

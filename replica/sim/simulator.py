"""A deterministic simulator that drives the real broker and controller cores.

One seeded event queue (integer ms) carries messages, timer expiries and peer
failure notices. The network (``network.py``) can delay, drop, cut (one way or
both) and hold messages; each broker has a simulated disk (``disk.py``); brokers
crash (in-memory state lost, written data kept unless ``lose_unflushed``) and
restart (the core starts again from what the disk recovered). A simulated
client produces and records acknowledgements. Everything a test needs to step
a protocol trace precisely is here: ``run_for``, ``run_until``, ``hold`` /
``release`` / ``fetch_round`` and per-replica queries (``leo``, ``hw``,
``epochs``, ``log``).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import config as cfg
from .. import protocol as P
from ..core import actions as A
from ..core.broker import BrokerCore
from ..core.controller import ControllerCore
from .. import storage as S
from .disk import SimDisk
from .network import Network
from .object_store import SimStore

CLIENT = "client"
CTL = A.CONTROLLER
STORE = A.REMOTE_STORE


@dataclass
class Op:
    """A client produce and what became of it: ok (acknowledged), fail (definitely
    not written) or info (unknown)."""
    topic: str
    partition: int
    values: list
    acks: Any
    target: Any
    status: str = "pending"
    offset: int | None = None
    error: str | None = None
    sent_ms: int = 0
    done_ms: int | None = None


@dataclass
class Node:
    name: Any
    core: Any = None
    alive: bool = False
    incarnation: int = 0
    timer_gen: int = 0
    disk: SimDisk = field(default_factory=SimDisk)


class Simulator:
    def __init__(self, era: str = "epoch", brokers: int = 3, seed: int = 0, config: dict | None = None,
                 delay_ms: int = 1, jitter_ms: int = 0, keep_logs: bool = False, cut_drops: bool = False):
        self.era = era
        self.config = cfg.build(era, config or {})
        self.rng = random.Random(seed)
        self.net = Network(self.rng, delay_ms, jitter_ms, cut_drops)
        self.now = 0
        self._queue: list = []
        self._seq = 0
        self.keep_logs = keep_logs
        self.logs: list[tuple[int, str]] = []
        self.controller_state: dict | None = None
        self.cluster_secret = f"sim-{seed}"      # the cores check it as the processes do
        self.broker_ids = list(range(1, brokers + 1))
        self.nodes: dict[Any, Node] = {CTL: Node(CTL), STORE: Node(STORE)}
        self.objects: dict[str, bytes] = {}     # the remote store's disk
        for b in self.broker_ids:
            self.nodes[b] = Node(b)
        self._client_corr = 0
        self._client_ops: dict[int, tuple[Op | None, Any]] = {}
        self._client_answers: dict[int, dict] = {}
        self._reply_api: dict[tuple, str] = {}
        self.ops: list[Op] = []
        self.acked: list[tuple[str, int, int, Any]] = []
        self.responses: dict[tuple[Any, str], int] = {}    # (node, api) -> responses processed
        self._start(CTL)
        self._start(STORE)
        for b in self.broker_ids:
            self._start(b)

    # ------------------------------------------------------------- running
    def _push(self, at: int, event: tuple) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, event))

    def step(self) -> bool:
        """Process the next event; False when nothing is left."""
        if not self._queue:
            return False
        at, _, event = heapq.heappop(self._queue)
        self.now = max(self.now, at)
        kind = event[0]
        if kind == "msg":
            self._deliver(*event[1:])
        elif kind == "timer":
            _, name, gen, inc = event
            node = self.nodes[name]
            if node.alive and node.timer_gen == gen and node.incarnation == inc:
                self._apply(node, node.core.on_timer(self.now))
        elif kind == "peer_failed":
            _, name, peer, peer_inc = event
            node = self.nodes[name]
            if node.alive:
                self._apply(node, node.core.on_peer_failed(peer, self.now))
                if hasattr(node.core, "on_connection_closed"):
                    self._apply(node, node.core.on_connection_closed((peer, peer_inc), self.now))
        return True

    def run_for(self, ms: int) -> None:
        end = self.now + ms
        while self._queue and self._queue[0][0] <= end:
            self.step()
        self.now = end

    def run_until(self, predicate: Callable[[], bool], limit_ms: int = 60000) -> bool:
        """Run until ``predicate()`` holds (checked after every event) or the limit passes."""
        end = self.now + limit_ms
        if predicate():
            return True
        while self._queue and self._queue[0][0] <= end:
            self.step()
            if predicate():
                return True
        self.now = end
        return predicate()

    # ------------------------------------------------------------ messages
    def _send(self, src, dst, kind: str, api: str | None, message: dict, dst_inc: int | None,
              src_inc: int) -> None:
        link = self.net.link(src, dst)
        event = ("msg", src, src_inc, dst, dst_inc, kind, api, message)
        target = self.nodes.get(dst)
        if kind == "request" and target is not None and not target.alive and src in self.nodes:
            # Connection refused: the sender learns at once (after one hop).
            self._push(self.now + self.net.latency(src, dst), ("peer_failed", src, dst, target.incarnation))
            return
        if link.holds(kind, api):
            link.held.append(event)
            return
        if link.cut:
            if not self.net.cut_drops:
                link.blocked.append(event)
            return
        if self.net.passes(src, dst):
            self._push(self.now + self.net.latency(src, dst), event)

    def _deliver(self, src, src_inc, dst, dst_inc, kind, api, message) -> None:
        if dst == CLIENT:
            self._client_response(src, message)
            return
        node = self.nodes.get(dst)
        if node is None or not node.alive or (dst_inc is not None and dst_inc != node.incarnation):
            return
        if kind == "request":
            conn = (src, src_inc)
            self._reply_api[(dst, conn, message.get("corr"))] = api
            self._apply(node, node.core.on_request(conn, message, self.now))
        else:
            key = (dst, api)
            self._apply(node, node.core.on_response(src, message, self.now))
            self.responses[key] = self.responses.get(key, 0) + 1

    def _apply(self, node: Node, actions: list) -> None:
        for a in actions:
            if isinstance(a, A.Send):
                # Bound to the destination's current incarnation, as a TCP connection
                # is: a process that restarts never sees its predecessor's traffic.
                dest = self.nodes.get(a.dest)
                self._send(node.name, a.dest, "request", a.message.get("api"), a.message,
                           dest.incarnation if dest is not None else None, node.incarnation)
            elif isinstance(a, A.Reply):
                peer, peer_inc = a.conn
                api = self._reply_api.pop((node.name, a.conn, a.message.get("corr")), None)
                self._send(node.name, peer, "response", api, a.message, peer_inc, node.incarnation)
            elif isinstance(a, A.SetTimer):
                node.timer_gen += 1
                self._push(a.at, ("timer", node.name, node.timer_gen, node.incarnation))
            elif isinstance(a, A.Persist):
                self.controller_state = a.state
            elif isinstance(a, (A.Log, A.Exit)):
                if self.keep_logs:
                    self.logs.append((self.now, a.text))
            else:
                node.disk.apply(a)

    # ------------------------------------------------------- crash / restart
    def _start(self, name) -> None:
        node = self.nodes[name]
        node.alive = True
        node.incarnation += 1
        if name == CTL:
            node.core = ControllerCore(self.era, self.config, address=["ctl", 0],
                                       cluster_secret=self.cluster_secret)
            self._apply(node, node.core.start(self.now, self.controller_state))
        elif name == STORE:
            node.core = SimStore(self.objects)
        else:
            node.core = BrokerCore(name, self.era, self.config, host=f"n{name}", port=name,
                                   controller_address=["ctl", 0], cluster_secret=self.cluster_secret)
            self._apply(node, node.core.start(self.now, node.disk.recovered()))

    def crash(self, name, lose_unflushed: bool = False) -> None:
        """Kill a node: in-memory state lost; peers see the connection drop."""
        node = self.nodes[name]
        if not node.alive:
            return
        node.alive = False
        node.core = None
        node.disk.crash(lose_unflushed)
        for link_key, link in self.net.links.items():
            if link_key[1] == name:
                link.held = [e for e in link.held if e[5] != "response"]
        for other in self.nodes.values():
            if other.name != name and other.alive:
                self._push(self.now + self.net.delay_ms, ("peer_failed", other.name, name, node.incarnation))
        for corr, (op, target) in list(self._client_ops.items()):
            if target == name and op is not None:
                self._finish_op(op, "info", P.NETWORK_ERROR)
                del self._client_ops[corr]

    def restart(self, name) -> None:
        if not self.nodes[name].alive:
            self._start(name)

    def sync_disk(self, name) -> None:
        """The OS wrote a broker's page cache back: everything written is now durable."""
        disk = self.nodes[name].disk
        for key in disk.written:
            disk.apply(A.Flush(key[0], key[1]))

    def alive(self, name) -> bool:
        return self.nodes[name].alive

    # ---------------------------------------------------------- network faults
    def cut(self, src, dst) -> None:
        """Stop every message from src to dst (a one-way partition): they wait
        for ``heal`` (or are lost, with ``cut_drops``)."""
        self.net.link(src, dst).cut = True

    def partition(self, a, b) -> None:
        self.cut(a, b)
        self.cut(b, a)

    def isolate(self, name) -> None:
        for other in self.nodes:
            if other != name:
                self.partition(name, other)
        self.partition(name, CLIENT)

    def heal(self) -> None:
        """End every partition and drop rate; waiting messages go out in order."""
        for (src, dst), link in list(self.net.links.items()):
            link.cut = False
            link.drop = 0.0
            waiting, link.blocked = link.blocked, []
            for event in waiting:
                self._push(self.now + self.net.latency(src, dst), event)

    def set_drop(self, src, dst, probability: float) -> None:
        self.net.link(src, dst).drop = probability

    def hold(self, src, dst, api: str | None = None, kind: str = "request") -> None:
        """Park messages from src to dst that match (kind, api) until released."""
        self.net.link(src, dst).hold.append((kind, api))

    def held(self, src, dst) -> list:
        return self.net.link(src, dst).held

    def release(self, src, dst, n: int = 1) -> int:
        """Deliver the first n held messages on the link; returns how many."""
        link = self.net.link(src, dst)
        batch, link.held = link.held[:n], link.held[n:]
        for event in batch:
            self._push(self.now + self.net.latency(src, dst), event)
        return len(batch)

    def unhold(self, src, dst) -> None:
        link = self.net.link(src, dst)
        link.hold = []
        self.release(src, dst, len(link.held))

    def fetch_round(self, follower: int, leader: int, limit_ms: int = 5000) -> None:
        """One follower fetch round on a held link: wait for the follower's next
        Fetch, deliver it, and run until the follower has processed the answer."""
        if not self.run_until(lambda: any(e[6] == P.FETCH for e in self.held(follower, leader)), limit_ms):
            raise AssertionError(f"no fetch from {follower} to {leader} within {limit_ms} ms")
        link = self.net.link(follower, leader)
        index = next(i for i, e in enumerate(link.held) if e[6] == P.FETCH)
        event = link.held.pop(index)
        before = self.responses.get((follower, P.FETCH), 0)
        self._push(self.now + self.net.latency(follower, leader), event)
        if not self.run_until(lambda: self.responses.get((follower, P.FETCH), 0) > before, limit_ms):
            raise AssertionError(f"fetch of {follower} from {leader} got no answer within {limit_ms} ms")

    # --------------------------------------------------------------- client
    def _client_request(self, target, message: dict, op: Op | None) -> int:
        self._client_corr += 1
        corr = self._client_corr
        message = dict(message, corr=corr)
        if not self.nodes[target].alive:
            if op is not None:
                self._finish_op(op, "fail", "CONNECTION_REFUSED")
            return corr
        self._client_ops[corr] = (op, target)
        self._send(CLIENT, target, "request", message["api"], message, self.nodes[target].incarnation, 0)
        return corr

    def _client_response(self, src, message: dict) -> None:
        corr = message.get("corr")
        entry = self._client_ops.pop(corr, None)
        if entry is None:
            return
        op = entry[0]
        if op is None:
            self._client_answers[corr] = message
            return
        error = message.get("error")
        if error is None:
            op.offset = message.get("offset")
            self._finish_op(op, "ok", None)
            if op.acks != 0:
                for i, v in enumerate(op.values):
                    self.acked.append((op.topic, op.partition, op.offset + i, v))
        elif error in P.INDEFINITE_PRODUCE_ERRORS:
            self._finish_op(op, "info", error)
        else:
            self._finish_op(op, "fail", error)

    def _finish_op(self, op: Op, status: str, error: str | None) -> None:
        op.status, op.error, op.done_ms = status, error, self.now

    def request(self, target, message: dict, limit_ms: int = 10000) -> dict | None:
        """Send a client request and run until its answer arrives (None if none)."""
        corr = self._client_request(target, message, None)
        self.run_until(lambda: corr in self._client_answers, limit_ms)
        return self._client_answers.pop(corr, None)

    def create_topic(self, topic: str = "log", partitions: int = 1, replication_factor: int | None = None,
                     config: dict | None = None, settle_ms: int = 100) -> dict:
        """Wait for every broker to register, create the topic, let leaders settle."""
        self.run_until(lambda: len(self.nodes[CTL].core.live_brokers()) == len(self.broker_ids), 30000)
        answer = self.request(CTL, {"api": P.CREATE_TOPIC, "topic": topic, "partitions": partitions,
                                    "replication_factor": replication_factor or len(self.broker_ids),
                                    "config": config or {}})
        if answer is None or answer.get("error"):
            raise RuntimeError(f"CreateTopic failed: {answer}")
        self.run_for(settle_ms)
        return answer

    def produce(self, topic: str, partition: int, values, acks: Any = "all", to: Any = None,
                timeout_ms: int | None = None) -> Op:
        """Send a Produce (to the controller's current leader unless ``to`` is given)."""
        values = values if isinstance(values, list) else [values]
        target = to if to is not None else self.leader(topic, partition)
        op = Op(topic, partition, values, acks, target, sent_ms=self.now)
        self.ops.append(op)
        if target is None:
            self._finish_op(op, "fail", "NO_LEADER")
            return op
        message = {"api": P.PRODUCE, "topic": topic, "partition": partition, "values": values, "acks": acks}
        if timeout_ms is not None:
            message["timeout_ms"] = timeout_ms
        self._client_request(target, message, op)
        return op

    # --------------------------------------------------------------- queries
    def controller(self) -> ControllerCore:
        return self.nodes[CTL].core

    def leader(self, topic: str, partition: int):
        """The leader in the controller's view (None when there is none)."""
        core = self.controller()
        try:
            return core.partition_state(topic, partition)["leader"]
        except KeyError:
            return None

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.controller().partition_state(topic, partition)["leader_epoch"]

    def isr(self, topic: str, partition: int) -> list:
        return list(self.controller().partition_state(topic, partition)["isr"])

    def replica(self, broker: int, topic: str = "log", partition: int = 0):
        node = self.nodes[broker]
        if not node.alive:
            return None
        return node.core.partitions.get((topic, partition))

    def leo(self, broker: int, topic: str = "log", partition: int = 0) -> int:
        return self.replica(broker, topic, partition).leo

    def hw(self, broker: int, topic: str = "log", partition: int = 0) -> int:
        return self.replica(broker, topic, partition).hw

    def epochs(self, broker: int, topic: str = "log", partition: int = 0) -> list:
        return [tuple(e) for e in self.replica(broker, topic, partition).epoch_cache.entries]

    def log(self, broker: int, topic: str = "log", partition: int = 0) -> list:
        """[(offset, epoch, value)] of a live replica."""
        return [(r[0], r[1], r[3]) for r in self.replica(broker, topic, partition).records]

    def values(self, broker: int, topic: str = "log", partition: int = 0) -> list:
        return [r[3] for r in self.replica(broker, topic, partition).records]

    def remote_leo(self, leader: int, follower: int, topic: str = "log", partition: int = 0) -> int:
        return self.replica(leader, topic, partition).remotes[follower].leo

    def run_task(self, broker, task: str, settle_ms: int = 50) -> None:
        """Run one periodic task of a broker now (``rlm``, ``retention``, ``hw-checkpoint``,
        ...), as if its interval had passed, then let its requests settle."""
        node = self.nodes[broker]
        if not node.alive or task not in node.core._periodic:
            raise ValueError(f"broker {broker} is down or has no task {task!r}")
        node.core._periodic[task] = self.now
        self._apply(node, node.core.on_timer(self.now))
        self.run_for(settle_ms)

    # ---------------------------------------------------------- remote tier
    def remote_segments(self, topic: str = "log", partition: int = 0) -> list:
        """The controller's remote log metadata of a partition."""
        return self.controller().remote_segments(topic, partition)

    def remote_records(self, topic: str = "log", partition: int = 0) -> dict:
        """offset -> (offset, epoch, crc, value) of every finished remote segment
        (decoded from the store's objects; a later copy of an offset wins)."""
        from ..core.tiered import object_keys
        out = {}
        for seg in self.remote_segments(topic, partition):
            if seg["state"] != P.COPY_SEGMENT_FINISHED:
                continue
            data = self.objects.get(object_keys(topic, partition, seg)["log"])
            if data is not None:
                for r in S.decode_records(data, seg["base"]):
                    out[r.offset] = tuple(r)
        return out

    def remote_object(self, topic: str, partition: int, segment: dict, kind: str) -> bytes | None:
        """One object of a remote segment: kind ``log``, ``index`` or ``epochs``."""
        from ..core.tiered import object_keys
        return self.objects.get(object_keys(topic, partition, segment)[kind])

    def record_at(self, broker: int, offset: int, topic: str = "log", partition: int = 0):
        """The record a live replica holds locally at ``offset`` (None when not local)."""
        p = self.replica(broker, topic, partition)
        if p is None or not p.local_start <= offset < p.leo:
            return None
        return p.records[offset - p.local_start]

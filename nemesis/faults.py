"""Faults built from Remote calls only (signals and iptables), so every
cluster backend gets every fault. Each fault has a start and a stop; both
return the JSON value that goes into the history as a nemesis op."""
from __future__ import annotations

import random
import time
from typing import Callable

import networkx as nx

from harness.cluster.base import CONTROLLER
from nemesis import grudges

CHAIN = "REPLOG-NEMESIS"  # our own chain: heal flushes only our rules


def pick_targets(brokers: list[str], rng: random.Random, leader: str | None) -> list[str]:
    """Jepsen's node specs: one, minority, majority, all, or the leader."""
    n = len(brokers)
    spec = rng.choice(["one", "one", "minority", "majority", "all", "leader"])
    if spec == "leader" and leader:
        return [leader]
    size = {"one": 1, "minority": max(1, (n - 1) // 2), "majority": n // 2 + 1, "all": n}.get(spec, 1)
    return sorted(rng.sample(brokers, size))


class Network:
    """iptables partitions inside the hosts."""

    def __init__(self, remotes: dict):
        self.remotes = remotes

    def _ensure_chain(self, remote) -> None:
        remote.run(["iptables", "-w", "-N", CHAIN], check=False)
        if remote.run(["iptables", "-w", "-C", "INPUT", "-j", CHAIN], check=False).returncode != 0:
            remote.run(["iptables", "-w", "-I", "INPUT", "-j", CHAIN])

    def apply(self, g: nx.DiGraph) -> dict[str, list[str]]:
        grudge = grudges.grudge_of(g)
        for node, sources in grudge.items():
            if not sources:
                continue
            remote = self.remotes[node]
            self._ensure_chain(remote)
            for src in sorted(sources):
                remote.run(["iptables", "-w", "-A", CHAIN, "-s", self.remotes[src].address, "-j", "DROP"])
        return grudges.describe(g)

    def heal(self) -> None:
        for remote in self.remotes.values():
            remote.run(["iptables", "-w", "-F", CHAIN], check=False)

    def remove(self) -> None:
        """Heal and take our chain out entirely (for hosts that outlive the run)."""
        for remote in self.remotes.values():
            remote.run(["iptables", "-w", "-D", "INPUT", "-j", CHAIN], check=False)
            remote.run(["iptables", "-w", "-F", CHAIN], check=False)
            remote.run(["iptables", "-w", "-X", CHAIN], check=False)


class Fault:
    """One kind of fault. start() picks targets with the schedule's rng and
    returns the history value; stop() undoes it and records its own
    nemesis op(s) through `record(f, value)`."""

    name: str
    stop_name: str

    def start(self, rng: random.Random, leader: str | None) -> object: ...

    def stop(self, rng: random.Random, record: Callable[[str, object], None]) -> None: ...


class Kill(Fault):
    """SIGKILL, then restart the victims one by one in random order, a random
    gap apart: some come back before the controller's session timeout
    notices them, others after, which is when restart truncation bites."""

    name, stop_name = "kill", "start"

    def __init__(self, db, stagger: float = 0.0):
        self.db = db
        self.stagger = stagger  # max seconds between two restarts
        self.victims: list[str] = []

    def start(self, rng, leader):
        self.victims = pick_targets(self.db.brokers, rng, leader)
        for n in self.victims:
            self.db.kill(n)
        return self.victims

    def stop(self, rng, record):
        order = rng.sample(self.victims, len(self.victims))
        for i, n in enumerate(order):
            if i and self.stagger:
                time.sleep(rng.uniform(0.2, 1.0) * self.stagger)
            if not self.db.running(n):
                self.db.start(n)
                record(self.stop_name, [n])
        self.victims = []


class Pause(Fault):
    name, stop_name = "pause", "resume"

    def __init__(self, db):
        self.db = db
        self.victims: list[str] = []

    def start(self, rng, leader):
        self.victims = pick_targets(self.db.brokers, rng, leader)
        for n in self.victims:
            self.db.pause(n)
        return self.victims

    def stop(self, rng, record):
        v, self.victims = self.victims, []
        for n in v:
            self.db.resume(n)
        record(self.stop_name, v)


class Partition(Fault):
    name, stop_name = "partition", "heal"

    def __init__(self, network: Network, hosts: list[str]):
        self.network = network
        self.hosts = hosts  # brokers and the controller

    def start(self, rng, leader):
        kind = rng.choice(grudges.KINDS)
        g = grudges.make(kind, self.hosts, rng, leader=leader, controller=CONTROLLER)
        return {"kind": kind, "grudge": self.network.apply(g)}

    def stop(self, rng, record):
        self.network.heal()
        record(self.stop_name, None)


def build(names: list[str], db, network: Network, interval: float = 0.0) -> list[Fault]:
    makers: dict[str, Callable[[], Fault]] = {
        "kill": lambda: Kill(db, stagger=interval / 2),
        "pause": lambda: Pause(db),
        "partition": lambda: Partition(network, [CONTROLLER, *db.brokers]),
    }
    return [makers[n]() for n in names]

"""Fault `kill`: SIGKILL the system's process on nodes; its stop (`start` in
the history, `restart` in scenario scripts) starts them again.

Random schedule: the victims come back one by one in random order, a random
gap apart (up to half the schedule's interval), so some return before the
cluster notices they were gone and some after -- when restart truncation bites.
A scripted restart of a running node kills it first.
"""
from __future__ import annotations

import time

from harness.sut import PROCESS, require
from nemesis.fault import FaultKind, Target, choose_nodes, restart_staggered


class Kill:
    def __init__(self, env):
        self.process = require(env.db, PROCESS, "fault kill")
        self.stagger = env.interval / 2
        self.victims: list[str] = []

    def choose(self, rng, view):
        return choose_nodes(KILL, rng, view)

    def aim(self, rng, plan, nodes):
        """The targeted schedule's target: these nodes (nemesis.targeted)."""
        return Target(list(nodes), spec="targeted")

    def start(self, target: Target):
        for n in target.nodes:
            self.process.kill(n)
        self.victims += [n for n in target.nodes if n not in self.victims]
        return target.nodes

    def stop(self, target, rng, record):
        if target is None:  # the schedule's stop: staggered, only those still down
            restart_staggered(self.process, self.victims, rng, self.stagger, record, KILL.stop)
            self.victims = []
            return
        for n in target.nodes:  # scripted: restart now, killing a running one first
            if self.process.running(n):
                self.process.kill(n)
                deadline = time.monotonic() + 5
                while self.process.running(n) and time.monotonic() < deadline:
                    time.sleep(0.02)
            self.process.start(n)
            if n in self.victims:
                self.victims.remove(n)
        record(KILL.stop, list(target.nodes))

    def heal(self):
        self.victims = []  # the final phase restarts every process that is down


KILL = FaultKind(name="kill", start="kill", stop="start", stop_step="restart", colour="#d62728",
                 needs=(PROCESS,), make=Kill,
                 description="SIGKILL the process on one, a minority, a majority, all nodes or a leader; restart later")

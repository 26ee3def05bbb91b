"""Fault `pause`: SIGSTOP the system's process on nodes; `resume` SIGCONTs them."""
from __future__ import annotations

from harness.sut import PAUSE, require
from nemesis.fault import FaultKind, Target, choose_nodes


class Pause:
    def __init__(self, env):
        self.pausable = require(env.db, PAUSE, "fault pause")
        self.victims: list[str] = []

    def choose(self, rng, view):
        return choose_nodes(PAUSE_FAULT, rng, view)

    def aim(self, rng, plan, nodes):
        """The targeted schedule's target: these nodes (nemesis.targeted)."""
        return Target(list(nodes), spec="targeted")

    def start(self, target: Target):
        for n in target.nodes:
            self.pausable.pause(n)
        self.victims += [n for n in target.nodes if n not in self.victims]
        return target.nodes

    def stop(self, target, rng, record):
        nodes = list(self.victims) if target is None else list(target.nodes)
        for n in nodes:
            self.pausable.resume(n)
        self.victims = [n for n in self.victims if n not in nodes]
        record(PAUSE_FAULT.stop, nodes)

    def heal(self):
        for n in self.victims:
            self.pausable.resume(n)
        self.victims = []


PAUSE_FAULT = FaultKind(name="pause", start="pause", stop="resume", colour="#9467bd",
                        needs=(PAUSE,), make=Pause,
                        description="SIGSTOP the process on nodes, SIGCONT later")

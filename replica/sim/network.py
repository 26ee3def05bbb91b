"""The simulated network: per directed link delay, drop probability, cut
(partition, possibly one way) and hold (park matching messages until released).

A cut link behaves like a TCP connection behind an iptables DROP rule: what is
sent waits (the kernel retransmits) and arrives in order once the link heals;
the cores' own request timeouts still fire meanwhile. With
``cut_drops=True`` a cut link loses its messages instead."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Link:
    delay_ms: int = 1
    jitter_ms: int = 0
    drop: float = 0.0
    cut: bool = False
    hold: list = field(default_factory=list)     # [(kind, api)] filters; api None = any
    blocked: list = field(default_factory=list)  # messages waiting for a cut link to heal
    held: list = field(default_factory=list)     # messages parked on this link

    def holds(self, kind: str, api: str | None) -> bool:
        return any((k == kind or k == "any") and (a is None or a == api) for k, a in self.hold)


class Network:
    def __init__(self, rng, delay_ms: int = 1, jitter_ms: int = 0, cut_drops: bool = False):
        self.rng = rng
        self.cut_drops = cut_drops
        self.delay_ms = max(1, delay_ms)
        self.jitter_ms = jitter_ms
        self.links: dict[tuple, Link] = {}

    def link(self, src, dst) -> Link:
        link = self.links.get((src, dst))
        if link is None:
            link = self.links[(src, dst)] = Link(self.delay_ms, self.jitter_ms)
        return link

    def latency(self, src, dst) -> int:
        link = self.link(src, dst)
        return link.delay_ms + (self.rng.randint(0, link.jitter_ms) if link.jitter_ms else 0)

    def passes(self, src, dst) -> bool:
        """Whether a message sent now survives random drop."""
        link = self.link(src, dst)
        return not (link.drop and self.rng.random() < link.drop)

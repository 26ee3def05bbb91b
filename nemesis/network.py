"""iptables partitions inside the hosts, built from Remote calls only, so
every cluster backend gets them. Our own chain: heal flushes only our rules."""
from __future__ import annotations

import networkx as nx

from harness.cluster.base import NEMESIS_CHAIN as CHAIN
from nemesis import grudges


class Network:
    def __init__(self, remotes: dict):
        self.remotes = remotes

    def _ensure_chain(self, remote) -> None:
        remote.run(["iptables", "-w", "-N", CHAIN], check=False)
        if remote.run(["iptables", "-w", "-C", "INPUT", "-j", CHAIN], check=False).returncode != 0:
            remote.run(["iptables", "-w", "-I", "INPUT", "-j", CHAIN])

    def apply(self, g: nx.DiGraph) -> dict[str, list[str]]:
        """Drop what the graph's grudge says (added to the rules in place); -> the grudge.

        With `g.graph["reject"]` the packets are refused instead (a TCP reset, an ICMP
        port-unreachable otherwise): the sender learns at once, and nothing a sender wrote
        during the cut waits in its kernel to be delivered after the heal (a dropped reply
        is retransmitted by the sender's kernel even after its process died). The resets
        themselves pass: a sender that never hears its peer's reset keeps retransmitting."""
        grudge = grudges.grudge_of(g)
        verdicts = [["-p", "tcp", "--tcp-flags", "RST", "RST", "-j", "ACCEPT"],
                    ["-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"], ["-j", "REJECT"]] \
            if g.graph.get("reject") else [["-j", "DROP"]]
        for node, sources in grudge.items():
            if not sources:
                continue
            remote = self.remotes[node]
            self._ensure_chain(remote)
            for src in sorted(sources):
                for verdict in verdicts:
                    remote.run(["iptables", "-w", "-A", CHAIN, "-s", self.remotes[src].address, *verdict])
        return grudges.describe(g)

    def unapply(self, g: nx.DiGraph) -> dict[str, list[str]]:
        """Remove the rules of the graph's grudge (a partial heal; dropped or refused alike),
        keeping every other rule; -> the grudge that was healed."""
        grudge = grudges.grudge_of(g)
        verdicts = [["-j", "DROP"], ["-p", "tcp", "--tcp-flags", "RST", "RST", "-j", "ACCEPT"],
                    ["-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"], ["-j", "REJECT"]]
        for node, sources in grudge.items():
            for src in sorted(sources):
                for verdict in verdicts:
                    while self.remotes[node].run(["iptables", "-w", "-D", CHAIN, "-s", self.remotes[src].address,
                                                  *verdict], check=False).returncode == 0:
                        pass
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

"""Fault `packet`: degrade links with tc netem (delay with jitter, loss,
duplication, reordering, corruption, rate) on every link, on the links of
chosen nodes, or only between chosen nodes; its stop (`heal-packet`, also
the final phase) removes every qdisc and rule it added.

Each host shapes its own egress: on all links, the root qdisc of the
host's interface is netem; for chosen nodes, a prio qdisc sends packets to
the chosen peers (u32 filters on the destination) through a netem band.

Kernels built without netem (CONFIG_NET_SCH_NETEM unset, e.g. this
project's development VM) get `rate` from tbf / htb and the rest from the
chain REPLOG-PACKET-IN (from INPUT), on the faulted packets (`-i <link>`,
`-s <peer>` for chosen nodes): `loss` is a `statistic` DROP (on receipt: a
DROP on OUTPUT would fail the sender's connect or send with EPERM, not lose
a packet); delay with jitter, duplication, reordering and corruption come
from NFQUEUE, a queue that the host's shaper daemon
(`nemesis/packet_shaper.py`, standard library, copied to the host and run
with its python) reads, holds and releases. Those hosts shape what they
receive, not what they send: a packet held on its sender's OUTPUT still
counts against the sending socket (TCP small queues), which cut a 20 ms
delayed TCP stream to ~0.25 MB/s; netem avoids that by orphaning the packet,
NFQUEUE cannot. The links and peers are the same either way. Which
way each host goes is decided once per host (netem when its kernel has it)
and is the history value's `via`. A host with neither is refused with one
line, and the random schedule then draws only what every host can do.

Scenario step: `packet: {delay_ms: 50, jitter_ms: 10, loss: 0.2, duplicate: 0.1,
reorder: 0.25, corrupt: 0.05, rate: 1mbit, between: [A, B] | nodes: [A]}`
(fractions, not percent), `heal-packet:`.

Cleanup: namespaces and containers take their qdiscs, rules and shaper
daemons with them (the netns backend kills every process left in a recorded
namespace); on ssh hosts every shaped interface is listed in
<work_dir>/.packet-devs before it is shaped and the shaper writes its pid to
<work_dir>/.packet-shaper-<host>.pid first thing, and the backend's cleanup deletes
the root qdiscs, kills the shaper and removes the chains.
"""
from __future__ import annotations

import posixpath
import shlex
import signal
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemesis.fault import ALL, MAJORITY, MINORITY, ONE, FaultArgError, FaultKind, Target, parse_model, pick

CHAIN = "REPLOG-PACKET"
IN_CHAIN = "REPLOG-PACKET-IN"   # the NFQUEUE way shapes what a host receives
DEVS_FILE = ".packet-devs"
SHAPER_PID = ".packet-shaper-{host}.pid"
SHAPER_FILE = Path(__file__).with_name("packet_shaper.py")
SHAPER = "packet-shaper"       # the daemon's name on each Remote
QUEUE = 4207                   # NFQUEUE number (queues are per network namespace)
MARK = "0x5e7"                 # the shaper's duplicates carry it and skip the queue
NETEM_ONLY = ("delay_ms", "jitter_ms", "duplicate", "reorder", "corrupt")
HAS_NFQUEUE = "test -e /proc/net/netfilter/nfnetlink_queue && command -v iptables >/dev/null"
HAS_NETEM = ("zcat /proc/config.gz 2>/dev/null | grep -q '^CONFIG_NET_SCH_NETEM=[ym]' || "
             "grep -qs '^CONFIG_NET_SCH_NETEM=[ym]' /boot/config-$(uname -r) || "
             "ls /lib/modules/$(uname -r)/kernel/net/sched/sch_netem.ko* >/dev/null 2>&1")
# Jepsen's packet behaviours (jepsen.nemesis.combined), as fractions
PROFILES = ({"delay_ms": 50, "jitter_ms": 10}, {"loss": 0.2}, {"duplicate": 0.2},
            {"reorder": 0.2, "delay_ms": 20}, {"corrupt": 0.2}, {"rate": "1mbit"},
            {"delay_ms": 50, "jitter_ms": 10, "loss": 0.2})


class PacketArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    delay_ms: float | None = Field(None, ge=0)
    jitter_ms: float | None = Field(None, ge=0)
    loss: float | None = Field(None, gt=0, le=1)
    duplicate: float | None = Field(None, gt=0, le=1)
    reorder: float | None = Field(None, gt=0, le=1)
    corrupt: float | None = Field(None, gt=0, le=1)
    rate: str | None = None
    between: list[str] | None = None     # only the links among these nodes
    nodes: list[str] | None = None       # every link of these nodes

    @model_validator(mode="after")
    def _check(self):
        if not any(getattr(self, k) is not None for k in ("delay_ms", "loss", "duplicate", "reorder", "corrupt",
                                                           "rate")):
            raise ValueError("give at least one of delay_ms, loss, duplicate, reorder, corrupt, rate")
        if self.jitter_ms is not None and self.delay_ms is None:
            raise ValueError("jitter_ms needs delay_ms")
        if self.reorder is not None and self.delay_ms is None:
            raise ValueError("reorder needs delay_ms (netem reorders by sending some packets undelayed)")
        if self.between is not None and self.nodes is not None:
            raise ValueError("give between or nodes, not both")
        if self.between is not None and len(self.between) < 2:
            raise ValueError("between takes two or more nodes")
        return self

    def behaviour(self) -> dict:
        return self.model_dump(exclude={"between", "nodes"}, exclude_none=True)

    def refs(self) -> list[str]:
        return list(self.between or self.nodes or [])

    def resolve(self, node, plan) -> Target:
        if self.between:
            return Target([node(r) for r in self.between], detail={"scope": "between", **self.behaviour()})
        if self.nodes:
            return Target([node(r) for r in self.nodes], detail={"scope": "nodes", **self.behaviour()})
        return Target(list(plan.hosts), detail={"scope": "all", **self.behaviour()})


def parse_start(arg) -> PacketArgs:
    return parse_model(PacketArgs, arg or {})


def parse_stop(arg):
    if arg not in (None, {}, True, "all"):
        raise FaultArgError("takes no arguments (write `- heal-packet:`)")
    return None


def netem_args(b: dict) -> list[str]:
    out = []
    if b.get("delay_ms") is not None:
        out += ["delay", f"{b['delay_ms']:g}ms"]
        if b.get("jitter_ms"):
            out += [f"{b['jitter_ms']:g}ms", "distribution", "normal"]
    for k in ("loss", "duplicate", "reorder", "corrupt"):
        if b.get(k) is not None:
            out += [k, f"{100 * b[k]:g}%"]
    if b.get("rate"):
        out += ["rate", b["rate"]]
    return out


class Packet:
    def __init__(self, env):
        self.remotes = {h: env.remotes[h] for h in env.plan.hosts}
        self.plan = env.plan
        self.work_dir = (env.cluster or env.db.cluster).layout.work_dir
        self.log = env.log
        self.devs: dict[str, str] = {}
        self.python = (env.cluster or env.db.cluster).layout.python
        self.netem: dict[str, bool] = {}
        self.nfqueue: dict[str, bool] = {}
        self.touched: set[str] = set()
        self.shaping: set[str] = set()   # hosts whose shaper daemon runs
        for h, r in self.remotes.items():  # decided once per host
            self.netem[h] = r.run(["sh", "-c", HAS_NETEM], check=False).returncode == 0
            self.nfqueue[h] = self.netem[h] or r.run(["sh", "-c", HAS_NFQUEUE], check=False).returncode == 0

    def via(self, host: str, b: dict) -> str:
        """How a host shapes: netem, nfqueue (the shaper daemon) or tc+iptables (rate: tbf/htb, loss: DROP)."""
        if self.netem[host]:
            return "netem"
        return "nfqueue" if any(k in b for k in NETEM_ONLY) else "tc+iptables"

    def _dev(self, host: str) -> str:
        if host not in self.devs:
            r = self.remotes[host]
            out = r.run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
            dev = next((line.split()[1] for line in out.splitlines()
                        if len(line.split()) > 3 and line.split()[3].split("/")[0] == r.address), None)
            if dev is None:
                raise FaultArgError(f"fault packet: host {host} has no interface with address {r.address}")
            self.devs[host] = dev
        return self.devs[host]

    def choose(self, rng, view):
        spec = rng.choice([ONE, MINORITY, MAJORITY, ALL, ALL])
        usable = [p for p in PROFILES if all(self.nfqueue.values()) or not any(k in p for k in NETEM_ONLY)]
        b = dict(rng.choice(usable))
        if spec == ALL:
            return Target(list(self.plan.hosts), detail={"scope": "all", **b}, spec=spec)
        return Target(pick(spec, self.plan.nodes, rng, view.leader), detail={"scope": "nodes", **b}, spec=spec)

    def aim(self, rng, plan, nodes):
        """The targeted schedule's target: every link of these nodes, with a profile drawn as `choose` does."""
        usable = [p for p in PROFILES if all(self.nfqueue.values()) or not any(k in p for k in NETEM_ONLY)]
        return Target(list(nodes), detail={"scope": "nodes", **dict(rng.choice(usable))}, spec="targeted")

    def start(self, target: Target):
        d = dict(target.detail)
        scope = d.pop("scope", "all")
        missing = [h for h in self.remotes if not self.nfqueue[h]]
        if missing and any(k in d for k in NETEM_ONLY):
            kinds = ", ".join(k for k in NETEM_ONLY if k in d)
            raise FaultArgError(f"fault packet: host {missing[0]}'s kernel has neither netem (CONFIG_NET_SCH_NETEM) "
                                f"nor NFQUEUE for {kinds}; use loss and rate there, or hosts whose kernel has "
                                f"sch_netem or nfnetlink_queue")
        chosen = set(target.nodes)
        via = {}
        for h in self.remotes:
            if scope == "all":
                peers = None
            elif scope == "between":
                if h not in chosen:
                    continue
                peers = sorted(chosen - {h})
            else:  # every link of the chosen nodes
                peers = None if h in chosen else sorted(chosen)
            via[h] = self.via(h, d)
            self._apply(h, d, peers)
        return {"scope": scope, "nodes": sorted(chosen) if scope != "all" else "all", **d, "via": via}

    def _apply(self, host: str, b: dict, peers: list[str] | None) -> None:
        r, dev = self.remotes[host], self._dev(host)
        self._note(host, dev)
        addrs = [self.remotes[p].address for p in peers] if peers is not None else None
        tc = ["tc", "qdisc", "replace", "dev", dev, "root"]
        if self.netem[host]:
            if addrs is None:
                r.run(tc + ["netem", *netem_args(b)])
            else:
                r.run(tc + ["handle", "1:", "prio", "bands", "4", "priomap", *["0"] * 16])
                r.run(["tc", "qdisc", "add", "dev", dev, "parent", "1:4", "handle", "40:", "netem", *netem_args(b)])
                for a in addrs:
                    r.run(["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                           "match", "ip", "dst", f"{a}/32", "flowid", "1:4"])
            return
        if b.get("rate"):
            if addrs is None:
                r.run(tc + ["tbf", "rate", b["rate"], "burst", "32kbit", "latency", "400ms"])
            else:
                r.run(tc + ["handle", "1:", "htb", "default", "10"])
                r.run(["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"])
                r.run(["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", b["rate"]])
                for a in addrs:
                    r.run(["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                           "match", "ip", "dst", f"{a}/32", "flowid", "1:20"])
        if b.get("loss"):  # dropped on receipt: a DROP on OUTPUT fails the sender's call (EPERM) instead
            _chain(r, IN_CHAIN, "INPUT")
            for a in addrs or [None]:
                src = ["-s", a] if a else []
                r.run(["iptables", "-w", "-A", IN_CHAIN, "-i", dev, *src, "-m", "statistic", "--mode", "random",
                       "--probability", f"{b['loss']:g}", "-j", "DROP"])
        if any(k in b for k in NETEM_ONLY):
            self._start_shaper(host, b)
            _chain(r, IN_CHAIN, "INPUT")
            r.run(["iptables", "-w", "-A", IN_CHAIN, "-m", "mark", "--mark", MARK, "-j", "RETURN"])
            for a in addrs or [None]:  # the same peers: a link is shaped at its receiving end
                src = ["-s", a] if a else []
                r.run(["iptables", "-w", "-A", IN_CHAIN, "-i", dev, *src, "-j", "NFQUEUE", "--queue-num", str(QUEUE),
                       "--queue-bypass"])

    def _start_shaper(self, host: str, b: dict) -> None:
        """Copy the shaper to the host and start it on the queue; return once it is bound
        (its rules come after, so no packet waits on a queue nobody reads)."""
        r = self.remotes[host]
        path = posixpath.join(self.work_dir, "packet_shaper.py")
        log = posixpath.join(self.work_dir, f"packet-shaper-{host}.log")
        r.put(str(SHAPER_FILE), path)
        argv = [self.python, path, "--queue", str(QUEUE), "--mark", MARK,
                "--pidfile", posixpath.join(self.work_dir, SHAPER_PID.format(host=host))]
        flags = {"delay_ms": "--delay-ms", "jitter_ms": "--jitter-ms", "reorder": "--reorder",
                 "duplicate": "--duplicate", "corrupt": "--corrupt"}
        for k, flag in flags.items():
            if b.get(k) is not None:
                argv += [flag, f"{b[k]:g}"]
        if host in self.shaping:
            self._stop_shaper(host)
        self.shaping.add(host)
        bound = f"bound queue {QUEUE}"
        before = r.run(["cat", log], check=False).stdout.count(bound)  # the log is appended to
        r.start_daemon(SHAPER, argv, log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if r.run(["cat", log], check=False).stdout.count(bound) > before:
                return
            if not r.daemon_running(SHAPER):
                break
            time.sleep(0.05)
        last = (r.run(["cat", log], check=False).stdout.strip().splitlines() or ["no output"])[-1]
        raise FaultArgError(f"fault packet: the shaper on host {host} did not start ({last}); "
                            f"it needs root, python3 and the kernel's nfnetlink_queue")

    def _stop_shaper(self, host: str) -> None:
        r = self.remotes[host]
        r.signal(SHAPER, signal.SIGTERM)  # it lets every held packet go, then exits
        deadline = time.monotonic() + 5
        while r.daemon_running(SHAPER) and time.monotonic() < deadline:
            time.sleep(0.02)
        if r.daemon_running(SHAPER):
            r.signal(SHAPER, signal.SIGKILL)
        self.shaping.discard(host)

    def _note(self, host: str, dev: str) -> None:
        """Record the interface on the host before shaping it (for the ssh backend's cleanup)."""
        if host in self.touched:
            return
        path = posixpath.join(self.work_dir, DEVS_FILE)
        self.remotes[host].run(["sh", "-c", f"mkdir -p {shlex.quote(self.work_dir)} && "
                                f"echo {shlex.quote(dev)} >> {shlex.quote(path)}"], check=False)
        self.touched.add(host)

    def _clear(self) -> list[str]:
        healed = []
        for h in sorted(self.touched):
            r, dev = self.remotes[h], self.devs.get(h)
            if dev:
                r.run(["tc", "qdisc", "del", "dev", dev, "root"], check=False)
            for chain, hook in ((CHAIN, "OUTPUT"), (IN_CHAIN, "INPUT")):  # nothing is queued after this
                r.run(["iptables", "-w", "-D", hook, "-j", chain], check=False)
                r.run(["iptables", "-w", "-F", chain], check=False)
                r.run(["iptables", "-w", "-X", chain], check=False)
            if h in self.shaping:
                self._stop_shaper(h)
            healed.append(h)
        return healed

    def stop(self, target, rng, record):
        self._clear()
        record(PACKET.stop, None)

    def heal(self) -> None:
        self._clear()


def _chain(r, chain: str, hook: str) -> None:
    """Create the fault's chain and jump to it from the hook, once."""
    r.run(["iptables", "-w", "-N", chain], check=False)
    if r.run(["iptables", "-w", "-C", hook, "-j", chain], check=False).returncode != 0:
        r.run(["iptables", "-w", "-I", hook, "-j", chain])


def cleanup_script(work_dir: str) -> str:
    """Shell for hosts that outlive a run: delete the root qdiscs listed in
    <work_dir>/.packet-devs, the shapers whose pids are in <work_dir>/.packet-shaper-*.pid,
    and the chains REPLOG-PACKET and REPLOG-PACKET-IN."""
    f = shlex.quote(posixpath.join(work_dir, DEVS_FILE))
    pids = shlex.quote(work_dir) + "/" + SHAPER_PID.format(host="*")
    return (f"if [ -f {f} ]; then sort -u {f} | while read -r d; do tc qdisc del dev \"$d\" root 2>/dev/null; "
            f"done; fi; for p in {pids}; do [ -f \"$p\" ] && kill -9 \"$(cat \"$p\")\" 2>/dev/null; rm -f \"$p\"; "
            f"done; if command -v iptables >/dev/null; then for ch in {CHAIN}:OUTPUT {IN_CHAIN}:INPUT; do "
            f"c=${{ch%:*}}; if iptables -w -n -L $c >/dev/null 2>&1; then iptables -w -D ${{ch#*:}} -j $c 2>/dev/null; "
            f"iptables -w -F $c; iptables -w -X $c; fi; done; fi; true")


PACKET = FaultKind(name="packet", start="packet", stop="heal-packet", stop_step="heal-packet", colour="#17becf",
                   make=Packet, targets=(ONE, MINORITY, MAJORITY, ALL), parse_start=parse_start,
                   parse_stop=parse_stop, host_cleanup=lambda base_dir: cleanup_script(base_dir + "/work"),
                   description="tc netem (NFQUEUE and a shaper daemon where the kernel has no netem) on links "
                               "(delay+jitter, loss, duplication, reordering, corruption, rate): all links, the "
                               "links of some nodes, or between nodes; heal-packet removes it")

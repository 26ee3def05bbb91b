"""The packet fault's shaper for kernels without netem: one daemon per host,
inside the host's network namespace, that takes the packets iptables sends to
an NFQUEUE (on INPUT: the packets the host receives) and gives each its
verdict later: held for delay +- jitter, released at once (out of order) for
reordering, copied for duplication, with a flipped bit for corruption.

    python3 packet_shaper.py --queue N [--delay-ms D --jitter-ms J --reorder P
                             --duplicate P --corrupt P --mark M --pidfile F --seed S]

Standard library only, in one file, so it is copied to docker and ssh hosts
that have nothing but python3. The PyPI binding NetfilterQueue can hold a
packet and give its verdict later too (1.x, `Packet.retain()`), but it is a
C extension over libnetfilter_queue: every host would need gcc, the Python
headers and libnetfilter-queue-dev to build it. The netlink it would hide is
four messages (bind, copy mode, packet, verdict): `Queue` below, ~90 lines.

Duplicates are sent through a raw IPv4 socket to the packet's own (local)
destination, so they arrive a second time over loopback; they carry the
mark M, which the fault's chain lets pass before its NFQUEUE rule. SIGTERM
releases every held packet (accept) and exits; the kernel drops what is
queued to a queue nobody listens on, so the fault removes its NFQUEUE rules
(which carry --queue-bypass) before stopping this.
"""
from __future__ import annotations

import argparse
import heapq
import os
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NETLINK_NO_ENOBUFS = 5
SOL_NETLINK = 270
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD, NFQA_CAP_LEN = 1, 2, 10, 19
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_DROP, NF_ACCEPT = 0, 1
SO_MARK = 36
SO_RCVBUFFORCE = 33


def _attr(kind: int, value: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(value), kind) + value
    return raw + b"\0" * (-len(raw) % 4)


def _attrs(buf: bytes) -> dict[int, bytes]:
    out, i = {}, 0
    while i + 4 <= len(buf):
        length, kind = struct.unpack_from("=HH", buf, i)
        if length < 4:
            break
        out[kind & 0x3FFF] = buf[i + 4:i + length]
        i += (length + 3) & ~3
    return out


class Queue:
    """One NFQUEUE bound over a netlink socket: packets in, verdicts out."""

    def __init__(self, num: int, maxlen: int = 20000):
        self.num = num
        self.seq = 0
        self.next_id: int | None = None
        self.lost = 0
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:  # past net.core.rmem_max (root): a full socket loses packet messages
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))
        self._config(_attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)))
        self._config(_attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_PACKET))
                     + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen)))

    def _send(self, msg_type: int, flags: int, body: bytes) -> None:
        self.seq += 1
        head = struct.pack("=IHHII", 16 + 4 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type,
                           NLM_F_REQUEST | flags, self.seq, 0)
        self.sock.send(head + struct.pack("!BBH", socket.AF_UNSPEC, 0, self.num) + body)

    def _config(self, body: bytes) -> None:
        self._send(NFQNL_MSG_CONFIG, NLM_F_ACK, body)
        reply = self.sock.recv(65536)
        _, kind = struct.unpack_from("=IH", reply)
        if kind == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", reply, 16)
            if err:
                raise OSError(-err, f"nfqueue {self.num}: {os.strerror(-err)}")

    def packets(self) -> list[tuple[int, bytes]]:
        """(packet id, IP packet) of every message waiting on the socket; a packet
        longer than the copy (NFQA_CAP_LEN) comes as b"" (a new payload would cut it)."""
        out = []
        while True:
            try:
                buf = self.sock.recv(1 << 18, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return out
            i = 0
            while i + 16 <= len(buf):
                length, kind = struct.unpack_from("=IH", buf, i)
                if length < 16:
                    break
                if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                    a = _attrs(buf[i + 20:i + length])
                    if NFQA_PACKET_HDR in a:
                        (pid,) = struct.unpack_from("!I", a[NFQA_PACKET_HDR])
                        self._skipped(pid)
                        data = a.get(NFQA_PAYLOAD, b"")
                        out.append((pid, b"" if NFQA_CAP_LEN in a else data))
                i += (length + 3) & ~3

    def _skipped(self, pid: int) -> None:
        """Packet ids count up by one; a gap is messages the socket lost (it was full).
        Their packets would wait in the kernel's queue forever: drop them, as netem
        drops past its limit."""
        if self.next_id is not None and 0 < pid - self.next_id < 1 << 20:
            for lost in range(self.next_id, pid):
                self.verdict(lost, NF_DROP)
            self.lost += pid - self.next_id
        self.next_id = pid + 1

    def verdict(self, pid: int, verdict: int = NF_ACCEPT, payload: bytes | None = None) -> None:
        body = _attr(NFQA_VERDICT_HDR, struct.pack("!II", verdict, pid))
        if payload is not None:
            body += _attr(NFQA_PAYLOAD, payload)
        self._send(NFQNL_MSG_VERDICT, 0, body)


def flip_bit(packet: bytes, rng: random.Random) -> bytes:
    """One random bit flipped past the IP header (netem flips anywhere; past the
    header the packet still reaches its receiver, whose checksum check fails)."""
    ihl = (packet[0] & 0x0F) * 4 if packet else 0
    start = ihl if len(packet) > ihl else 0
    if not packet:
        return packet
    i = rng.randrange(start, len(packet))
    return packet[:i] + bytes([packet[i] ^ (1 << rng.randrange(8))]) + packet[i + 1:]


class Shaper:
    def __init__(self, args):
        self.a = args
        self.rng = random.Random(args.seed)
        self.queue = Queue(args.queue)
        self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.raw.setsockopt(socket.SOL_SOCKET, SO_MARK, args.mark)
        self.held: list[tuple] = []  # (due, order, id, packet, new payload or None, copy?)
        self.order = 0
        self.stopping = False

    def hold_for(self) -> float:
        if not self.a.delay_ms or (self.a.reorder and self.rng.random() < self.a.reorder):
            return 0.0
        d = self.a.delay_ms
        if self.a.jitter_ms:
            d = self.rng.gauss(d, self.a.jitter_ms)
        return max(0.0, d) / 1000.0

    def take(self, pid: int, packet: bytes) -> None:
        new = flip_bit(packet, self.rng) if packet and self.a.corrupt and self.rng.random() < self.a.corrupt else None
        copy = bool(self.a.duplicate) and self.rng.random() < self.a.duplicate
        wait = self.hold_for()
        if wait == 0.0:
            self.release(pid, packet, new, copy)
        else:
            self.order += 1
            heapq.heappush(self.held, (time.monotonic() + wait, self.order, pid, packet, new, copy))

    def release(self, pid: int, packet: bytes, new: bytes | None, copy: bool) -> None:
        self.queue.verdict(pid, NF_ACCEPT, new)
        if copy and len(packet) >= 20 and packet[0] >> 4 == 4:
            try:
                self.raw.sendto(packet, (socket.inet_ntoa(packet[16:20]), 0))
            except OSError:
                pass

    def run(self) -> None:
        fd = self.queue.sock.fileno()
        wake_r, wake_w = os.pipe()  # a signal wakes select at once (Python retries it otherwise)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        while not self.stopping:
            timeout = max(0.0, self.held[0][0] - time.monotonic()) if self.held else 1.0
            try:
                ready, _, _ = select.select([fd, wake_r], [], [], timeout)
            except InterruptedError:
                ready = []
            if fd in ready:
                for pid, packet in self.queue.packets():
                    self.take(pid, packet)
            now = time.monotonic()
            while self.held and self.held[0][0] <= now:
                _, _, pid, packet, new, copy = heapq.heappop(self.held)
                self.release(pid, packet, new, copy)
        while self.held:  # stopping: let everything held go
            _, _, pid, packet, new, copy = heapq.heappop(self.held)
            self.release(pid, packet, new, copy)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queue", type=int, required=True)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--reorder", type=float, default=0.0)
    p.add_argument("--duplicate", type=float, default=0.0)
    p.add_argument("--corrupt", type=float, default=0.0)
    p.add_argument("--mark", type=lambda s: int(s, 0), default=0x5E7)
    p.add_argument("--pidfile")
    p.add_argument("--seed", type=int)
    args = p.parse_args(argv)
    if args.pidfile:
        with open(args.pidfile, "w") as f:
            f.write(f"{os.getpid()}\n")
    try:
        shaper = Shaper(args)
    except OSError as e:
        print(f"packet-shaper: cannot bind nfqueue {args.queue}: {e} (needs root and "
              f"CONFIG_NETFILTER_NETLINK_QUEUE)", file=sys.stderr)
        return 2

    def stop(*_):
        shaper.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"packet-shaper: bound queue {args.queue}", flush=True)
    shaper.run()
    print(f"packet-shaper: released every held packet, exiting ({shaper.queue.lost} lost to a full "
          f"socket and dropped)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

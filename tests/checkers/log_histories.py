"""Hand-made histories for the log checker tests: a tiny builder and named cases.

Each case is a list of op dicts as in history.jsonl. `clean()` has no anomaly;
every other case injects one anomaly type (its name) into an otherwise clean
history; EXPECTED says which types each case must show and nothing else.
"""

from __future__ import annotations


class History:
    """Appends ops with consecutive indices, the way the harness writes them."""

    def __init__(self) -> None:
        self.ops: list[dict] = []

    def _add(self, process, kind, f, value) -> int:
        index = len(self.ops)
        self.ops.append({"index": index, "time": index * 1000, "process": process,
                         "type": kind, "f": f, "value": value})
        return index

    def send(self, process, key, value, offset=None, kind="ok") -> None:
        self._add(process, "invoke", "send", [key, value])
        body = [offset, value] if kind == "ok" else value
        self._add(process, kind, "send", [key, body])

    def invoke_send(self, process, key, value) -> None:
        self._add(process, "invoke", "send", [key, value])

    def complete_send(self, process, key, value, offset) -> None:
        self._add(process, "ok", "send", [key, [offset, value]])

    def poll(self, process, reads: dict) -> None:
        self._add(process, "invoke", "poll", None)
        self._add(process, "ok", "poll", {str(k): [list(p) for p in v] for k, v in reads.items()})

    def final(self) -> None:
        self._add("nemesis", "info", "final", None)


def body() -> History:
    """Two keys, two producers, a consumer that keeps up; everything before the final phase."""
    h = History()
    h.send(0, 0, 100, 0)
    h.send(1, 1, 200, 0)
    h.send(0, 0, 101, 1)
    h.poll(2, {0: [(0, 100), (1, 101)]})
    h.send(1, 1, 201, 1)
    h.send(0, 0, 102, kind="info")          # indefinite: may or may not exist
    h.send(1, 1, 202, kind="fail")          # definitely not written
    h.poll(2, {0: [(2, 102)], 1: [(0, 200)]})
    h.poll(2, {1: [(1, 201)]})
    return h


def finish(h: History, last: dict | None = None) -> History:
    """The final phase: a fresh consumer re-reads both keys from the start, and its
    last poll of each key comes back empty at the end (as workloads/log.py's does)."""
    h.final()
    h.poll(3, last or {0: [(0, 100), (1, 101), (2, 102)], 1: [(0, 200), (1, 201)]})
    h.poll(3, {0: [], 1: []})
    return h


def clean() -> History:
    return finish(body())


def lost_write() -> History:
    h = body()
    h.send(0, 0, 103, 3)                    # acknowledged at 3, never read ...
    h.send(1, 0, 104, 4)
    h.poll(4, {0: [(4, 104)]})              # ... although offset 4 was read
    return finish(h)


def unseen() -> History:
    h = body()
    h.send(0, 1, 203, 2)                    # acknowledged, nothing at or after 2 read
    return finish(h)


def inconsistent_offsets() -> History:
    h = body()
    h.send(0, 1, 203, 2)
    h.poll(4, {1: [(2, 299)]})              # another value at offset 2 of key 1
    h.send(0, 1, 204, 3)
    h.poll(4, {1: [(3, 204)]})
    h.poll(5, {1: [(2, 203), (3, 204)]})
    return finish(h)


def duplicate() -> History:
    h = body()
    h.send(0, 1, 203, 2)
    h.poll(4, {1: [(2, 203), (3, 203)]})    # one value at two offsets
    return finish(h)


def nonmonotonic_poll() -> History:
    h = body()
    h.poll(2, {0: [(1, 101)]})              # process 2 already read up to 2 on key 0
    return finish(h)


def poll_skip() -> History:
    h = body()
    h.send(0, 1, 203, 2)
    h.send(0, 1, 204, 3)
    h.poll(2, {1: [(3, 204)]})              # process 2 read 1 last time, now 3: skipped 2
    h.poll(4, {1: [(2, 203), (3, 204)]})
    return finish(h)


def nonmonotonic_send() -> History:
    h = body()
    h.send(5, 1, 203, 3)
    h.send(5, 1, 204, 2)                    # same process, later send, lower offset
    h.poll(4, {1: [(2, 204), (3, 203)]})
    return finish(h)


def aborted_read() -> History:
    h = body()
    h.poll(4, {1: [(0, 200), (1, 201), (2, 202)]})  # 202's send failed
    return finish(h)


def realtime_order() -> History:
    h = body()
    h.send(5, 1, 204, 3)                    # acknowledged at 3 ...
    h.send(6, 1, 203, 2)                    # ... before this one was invoked: got 2
    h.poll(4, {1: [(2, 203), (3, 204)]})
    return finish(h)


def read_then_lost() -> History:
    h = body()                              # 201 acknowledged at 1 of key 1 and read
    h.send(5, 1, 203, 1)                    # a new leader took offset 1 again
    return finish(h, {0: [(0, 100), (1, 101), (2, 102)], 1: [(0, 200), (1, 203)]})


def interrupted() -> History:
    """Killed before the final phase: 201 was read, 203 acknowledged and not read yet."""
    h = body()
    h.send(0, 1, 203, 2)
    return h


ANOMALOUS = {
    "lost-write": lost_write,
    "unseen": unseen,
    "inconsistent-offsets": inconsistent_offsets,
    "duplicate": duplicate,
    "nonmonotonic-poll": nonmonotonic_poll,
    "poll-skip": poll_skip,
    "nonmonotonic-send": nonmonotonic_send,
    "aborted-read": aborted_read,
    "realtime-order": realtime_order,
    "read-then-lost": read_then_lost,
}

# A process's own sends are also ordered in real time, so a nonmonotonic send
# is always a realtime-order violation too (in Jepsen as well: G0-realtime).
EXPECTED = {name: {name} for name in ANOMALOUS}
EXPECTED["nonmonotonic-send"] = {"nonmonotonic-send", "realtime-order"}
# The value that took its offset is a second value there.
EXPECTED["read-then-lost"] = {"read-then-lost", "inconsistent-offsets"}

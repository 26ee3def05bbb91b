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

    def assign(self, process, keys, f="assign") -> None:
        """The process's consumer takes these keys (f "assign" or "subscribe")."""
        self._add(process, "invoke", f, list(keys))
        self._add(process, "ok", f, list(keys))


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


DEFAULT_FINAL = {0: [(0, 100), (1, 101), (2, 102)], 1: [(0, 200), (1, 201)]}   # the body's log


def finish(h: History, last: dict | None = None) -> History:
    """The final phase: a fresh consumer re-reads both keys from the start, and its
    last poll of each key comes back empty at the end (as workloads/log.py's does).
    Without `last` it reads the body's records and every record a poll read before
    (first value seen at each offset): a case loses nothing it did not mean to lose."""
    if last is None:
        log = {key: dict(pairs) for key, pairs in DEFAULT_FINAL.items()}
        for op in h.ops:
            if op["f"] == "poll" and op["type"] == "ok":
                for key, pairs in op["value"].items():
                    for offset, value in pairs:
                        log.setdefault(int(key), {}).setdefault(offset, value)
        last = {key: sorted(records.items()) for key, records in log.items()}
    h.final()
    h.poll(3, last)
    h.poll(3, {0: [], 1: []})
    return h


def clean() -> History:
    return finish(body())


def lost_write() -> History:
    h = body()
    h.send(0, 0, 103, 3)                    # acknowledged at 3, never read ...
    h.send(1, 0, 104, kind="info")          # (indefinite: its loss is no anomaly)
    h.poll(4, {0: [(4, 104)]})              # ... although offset 4 was read
    return finish(h, DEFAULT_FINAL)


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
    return finish(h, {**DEFAULT_FINAL, 1: [(0, 200), (1, 201), (2, 203), (3, 204)]})


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
    return finish(h, DEFAULT_FINAL)


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


def truncated_tail() -> History:
    """203 acknowledged at 2 of key 1 and read, then the log was cut back to 2: the final
    reads end below it (no final read reaches offset 2, so only the end row tells)."""
    h = body()
    h.send(0, 1, 203, 2)
    h.poll(4, {1: [(2, 203)]})
    return finish(h, DEFAULT_FINAL)


def interrupted() -> History:
    """Killed before the final phase: 201 was read, 203 acknowledged and not read yet."""
    h = body()
    h.send(0, 1, 203, 2)
    return h


# -- the consumer's semantics (issue 29) ------------------------------------
# body()'s consumer, process 2, has read key 0 up to offset 2 and key 1 up to 1.

def reassigned_then_backwards() -> History:
    """An assign that keeps key 0: its position stays, so going back is nonmonotonic."""
    h = body()
    h.assign(2, [0, 1])
    h.poll(2, {0: [(1, 101)]})
    return finish(h)


def resubscribed_then_skip() -> History:
    """A subscribe that keeps key 0: jumping from 2 to 4 skips the known offset 3."""
    h = body()
    h.send(0, 0, 103, 3)
    h.send(0, 0, 104, 4)
    h.assign(2, [0, 1], f="subscribe")
    h.poll(2, {0: [(4, 104)]})
    h.poll(4, {0: [(3, 103), (4, 104)]})
    return finish(h, {0: [(0, 100), (1, 101), (2, 102), (3, 103), (4, 104)],
                      1: [(0, 200), (1, 201)]})


def reassigned_dropping_key() -> History:
    """An assign without key 0, then one with it: key 0 starts afresh (no anomaly), and
    key 1, kept both times, goes on where it was."""
    h = body()
    h.assign(2, [1])
    h.assign(2, [0, 1])
    h.poll(2, {0: [(0, 100), (1, 101)]})
    h.send(1, 1, 203, 2)
    h.poll(2, {1: [(2, 203)]})
    return finish(h, {0: [(0, 100), (1, 101), (2, 102)], 1: [(0, 200), (1, 201), (2, 203)]})


def sends_across_reassignment() -> History:
    """A process's sends are ordered whatever its consumer does: dropping key 1 from its
    assignment between two sends to key 1 does not excuse the second's lower offset."""
    h = body()
    h.send(5, 1, 203, 3)
    h.assign(5, [0])
    h.send(5, 1, 204, 2)
    h.poll(4, {1: [(2, 204), (3, 203)]})
    return finish(h)


def timed_out_sends_read_reversed() -> History:
    """Two sends that timed out (info, no offset) were read back in the reverse of the
    order the process sent them: nonmonotonic-send on key 1."""
    h = body()
    h.send(5, 1, 204, kind="info")
    h.send(5, 1, 203, kind="info")
    h.poll(4, {1: [(2, 203), (3, 204)]})
    return finish(h)


def timed_out_sends_unread() -> History:
    """The same timed-out sends, never read: nowhere to place them, nothing to report."""
    h = body()
    h.send(5, 1, 204, kind="info")
    h.send(5, 1, 203, kind="info")
    return finish(h)


# name -> (history, the anomaly types it must show and no other)
CONSUMER = {
    "reassigned-then-backwards": (reassigned_then_backwards, {"nonmonotonic-poll"}),
    "resubscribed-then-skip": (resubscribed_then_skip, {"poll-skip"}),
    "reassigned-dropping-key": (reassigned_dropping_key, set()),
    # as nonmonotonic_send: a process's own sends are also ordered in real time
    "sends-across-reassignment": (sends_across_reassignment, {"nonmonotonic-send", "realtime-order"}),
    "timed-out-sends-read-reversed": (timed_out_sends_read_reversed, {"nonmonotonic-send"}),
    "timed-out-sends-unread": (timed_out_sends_unread, set()),
    "truncated-tail": (truncated_tail, {"read-then-lost"}),
}


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

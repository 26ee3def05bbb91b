"""The replica diff with the tiered-storage remote tier as one more copy
(the dump ``remote`` made by ``replica.remote_store.remote_dump``)."""

from checkers import replica_diff
from replica.protocol import record_crc
import pytest

pytestmark = pytest.mark.unit


def rec(offset, epoch, value):
    return [offset, epoch, record_crc(value), value]


def part(records, hw, log_start=0):
    return {"topic": "log", "partition": 0, "hw": hw, "leo": records[-1][0] + 1 if records else hw,
            "log_start": log_start, "records": records}


def dumps(remote_records, n2_records):
    local = [rec(o, 1, 100 + o) for o in range(6, 9)]
    return {
        "n1": {"broker": 1, "partitions": [part(local, 9)]},
        "n2": {"broker": 2, "partitions": [part(n2_records, 9)]},
        "remote": {"broker": "remote", "partitions": [part(remote_records, 6)]},
    }


def sends(n):
    ops = []
    for o in range(n):
        ops.append({"index": 2 * o, "time": o, "process": 0, "type": "invoke", "f": "send", "value": [0, 100 + o]})
        ops.append({"index": 2 * o + 1, "time": o, "process": 0, "type": "ok", "f": "send",
                    "value": [0, [o, 100 + o]]})
    # the final phase reads the key to its end (without it, lost-acknowledged is undecided)
    ops.append({"index": 2 * n, "time": n, "process": "nemesis", "type": "info", "f": "final", "value": None})
    ops.append({"index": 2 * n + 1, "time": n, "process": 1, "type": "invoke", "f": "poll", "value": None})
    ops.append({"index": 2 * n + 2, "time": n, "process": 1, "type": "ok", "f": "poll",
                "value": {"0": [[o, 100 + o] for o in range(n)]}})
    return ops


def test_offsets_held_only_remotely_are_held():
    remote = [rec(o, 1, 100 + o) for o in range(6)]
    result = replica_diff.check(dumps(remote, [rec(o, 1, 100 + o) for o in range(6, 9)]), sends(9))
    assert result["valid"] is True, result
    without = dumps(remote, [rec(o, 1, 100 + o) for o in range(6, 9)])
    del without["remote"]
    result = replica_diff.check(without, sends(9))
    assert result["counts"]["missing-committed"] == 6 and result["counts"]["lost-acknowledged"] == 6


def test_a_remote_record_that_differs_from_a_replica_is_divergence():
    remote = [rec(o, 1, 100 + o) for o in range(6)]
    n2 = [rec(o, 0, o) for o in range(4, 6)] + [rec(o, 1, 100 + o) for o in range(6, 9)]
    result = replica_diff.check(dumps(remote, n2), sends(9))
    assert result["valid"] is False and result["counts"]["divergence"] == 2
    example = result["examples"]["divergence"][0]
    assert example["offset"] == 4 and ["remote", 1, 104] in example["replicas"] and ["n2", 0, 4] in example["replicas"]

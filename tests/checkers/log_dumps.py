"""Hand-made replica dumps for the replica-diff tests (format: docs/interfaces.md, Dump)."""

from __future__ import annotations

import zlib
import json


def record(offset, epoch, value):
    return [offset, epoch, zlib.crc32(json.dumps(value).encode()), value]


def dump(broker, partitions):
    """partitions: {key: (hw, log_start, [(offset, epoch, value), ...])}"""
    parts = []
    for key, (hw, log_start, records) in sorted(partitions.items()):
        leo = max((o for o, _e, _v in records), default=log_start - 1) + 1
        parts.append({"topic": "log", "partition": key, "hw": hw, "leo": leo,
                      "log_start": log_start, "records": [record(*r) for r in records]})
    return {"broker": broker, "partitions": parts}


def agreeing():
    """Three replicas of two keys that agree with tests.checkers.log_histories.clean()."""
    key0 = [(0, 0, 100), (1, 0, 101), (2, 0, 102)]
    key1 = [(0, 0, 200), (1, 0, 201)]
    return {
        "n1": dump(1, {0: (3, 0, key0), 1: (2, 0, key1)}),
        "n2": dump(2, {0: (3, 0, key0), 1: (2, 0, key1)}),
        # n3 lags on key 0: its HW is behind and its tail is uncommitted there.
        "n3": dump(3, {0: (2, 0, key0[:2] + [(2, 1, 999)]), 1: (2, 0, key1)}),
    }


def divergent():
    dumps = agreeing()
    # n2 holds another record at committed offset 1 of key 1 (epoch 1 vs 0).
    dumps["n2"] = dump(2, {0: (3, 0, [(0, 0, 100), (1, 0, 101), (2, 0, 102)]),
                           1: (2, 0, [(0, 0, 200), (1, 1, 777)])})
    return dumps


def epoch_only():
    """divergent(), but n2 holds the same record (201) at key 1's committed offset 1 in
    another leader epoch: what a flipped epoch bit does, since a record's CRC omits it."""
    dumps = agreeing()
    dumps["n2"] = dump(2, {0: (3, 0, [(0, 0, 100), (1, 0, 101), (2, 0, 102)]),
                           1: (2, 0, [(0, 0, 200), (1, 32, 201)])})
    return dumps


def missing_committed():
    dumps = agreeing()
    # Offset 1 of key 0 is below the HW but no replica holds it; n1 lost 101.
    for node in ("n1", "n2", "n3"):
        part = dumps[node]["partitions"][0]
        part["records"] = [r for r in part["records"] if r[0] != 1]
    return dumps


def lost_acknowledged():
    """Every replica lost 201 (acknowledged at offset 1 of key 1) and HW fell back."""
    dumps = agreeing()
    for node in ("n1", "n2", "n3"):
        part = dumps[node]["partitions"][1]
        part["records"] = [r for r in part["records"] if r[0] != 1]
        part["hw"] = part["leo"] = 1
    return dumps


def overwritten():
    """agreeing(), and n1's copy from before a restart (its past copy 1, named as the replica
    diff names it) that held 555 at key 0's committed offset 2, where every final replica
    holds 102."""
    dumps = agreeing()
    dumps["n1@past1"] = dump(1, {0: (3, 0, [(0, 0, 100), (1, 0, 101), (2, 0, 555)])})
    return dumps

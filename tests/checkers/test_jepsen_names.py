"""The vocabulary's Jepsen column names what Jepsen's Kafka queue checker reports.

JEPSEN_KAFKA is written from jepsen-io/jepsen's
jepsen/src/jepsen/tests/kafka.clj (commit c4c7473d, 2026-07-30): the keys
`analysis` puts in :errors, and the cycle anomalies its `cycles!` gets from
Elle at :strict-serializable (the ones `allowed-error-types` names). A name
in the vocabulary that is not one of these is one Jepsen never reports; an
anomaly Jepsen has no name for says so (an empty column) and why.
"""

import pytest

from checkers.vocabulary import ANOMALIES, VOCABULARY

pytestmark = pytest.mark.unit

# Jepsen's name -> what its checker finds (kafka.clj, in its own words)
JEPSEN_KAFKA = {
    ":duplicate": "a single value appears at more than one offset of a key (duplicate-cases)",
    ":int-poll-skip": "two reads of a key within one poll skip over part of the log",
    ":int-nonmonotonic-poll": "two reads of a key within one poll go backwards or repeat",
    ":int-nonmonotonic-send": "two sends to a key within one op go backwards",
    ":int-send-skip": "two sends to a key within one op skip offsets (always allowed)",
    ":inconsistent-offsets": "one offset of a key holds different values (version-orders :errors)",
    ":precommitted-read": "a transaction observed its own sends",
    ":G1a": "a read of a value whose send failed (aborted read, g1a-cases)",
    ":lost-write": "an ok (or read) send, not returned by any ok poll, below the highest read "
                   "index of its key (lost-write-cases: read values are struck first)",
    ":nonmonotonic-poll": "a process's poll starts at or before where its previous poll of the "
                          "key ended; an assign/subscribe keeps only the keys it names",
    ":nonmonotonic-send": "a process's send to a key lands at or before its previous one; an "
                          "assign/subscribe keeps only the keys it names",
    ":poll-skip": "a process's poll skips values after its previous poll of the key",
    ":unseen": "acknowledged values no ok poll returned, at the end of the history",
    ":G0": "write cycle (Elle)", ":G0-process": "write cycle with process order (Elle)",
    ":G0-realtime": "write cycle with real-time order (Elle; ww edges only with :ww-deps)",
    ":G1c": "circular information flow (Elle)", ":G1c-process": "G1c with process order (Elle)",
    ":G1c-realtime": "G1c with real-time order (Elle)",
}

# Our anomaly -> the Jepsen names its column must hold (() for none).
COLUMN = {
    "lost-write": (":lost-write",),
    "unseen": (":unseen",),
    "inconsistent-offsets": (":inconsistent-offsets",),
    "duplicate": (":duplicate",),
    "nonmonotonic-poll": (":nonmonotonic-poll", ":int-nonmonotonic-poll"),
    "poll-skip": (":poll-skip", ":int-poll-skip"),
    "nonmonotonic-send": (":nonmonotonic-send",),
    "aborted-read": (":G1a",),
    "realtime-order": (":G0-realtime",),
    # Jepsen's lost-write strikes every value an ok poll returned first: a value read and
    # later gone is never one of its lost writes.
    "read-then-lost": (),
    # replica state: Jepsen reads only what clients saw
    "divergence": (),
    "overwritten": (),
    "missing-committed": (),
    "lost-acknowledged": (),
    # the txn checker: Elle's cycle names and Jepsen's own
    "G0": (":G0",), "G0-process": (":G0-process",), "G0-realtime": (":G0-realtime",),
    "G1c": (":G1c",), "G1c-process": (":G1c-process",), "G1c-realtime": (":G1c-realtime",),
    "G1a": (":G1a",), "precommitted-read": (":precommitted-read",),
    "txn-lost-write": (":lost-write",), "txn-duplicate": (":duplicate",),
    "txn-inconsistent-offsets": (":inconsistent-offsets",),
}


def test_the_table_covers_every_anomaly():
    assert set(COLUMN) == set(ANOMALIES)


@pytest.mark.parametrize("name", sorted(ANOMALIES))
def test_jepsen_column_is_what_jepsens_checker_reports(name):
    anomaly = VOCABULARY[name]
    assert anomaly.jepsen == COLUMN[name]
    assert set(anomaly.jepsen) <= set(JEPSEN_KAFKA), "a name Jepsen's Kafka checker never reports"
    if not anomaly.jepsen:
        assert anomaly.jepsen_note, f"{name}: say why Jepsen reports nothing for it"


def test_read_then_lost_is_not_jepsens_lost_write():
    assert ":lost-write" not in VOCABULARY["read-then-lost"].jepsen

"""The one anomaly vocabulary: every name a checker can put in results.json
(`checkers.<checker>.counts`), which checker emits it, what it means in one
line, the phrase a report's verdict sentence uses, and what Jepsen reports
for it. Checkers, scenarios (allowed / expected anomalies) and reports all
read this table; tests/architecture/test_vocabulary.py checks both
directions (every name here can be emitted, every emitted name is here).

The Jepsen column is what Jepsen's Kafka queue checker (`jepsen.tests.kafka`,
its `analysis` :errors, with Elle's cycle names) reports for a history with
this anomaly, or nothing: not the nearest name. Read from kafka.clj at
jepsen-io/jepsen c4c7473d (2026-07-30); tests/checkers/test_jepsen_names.py
holds the column to a table of that checker's names.

A new anomaly is one entry here plus the checker that emits it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Anomaly:
    name: str
    checker: str          # the results.json checker section that counts it
    explanation: str      # one line for a reader who did not write the checker
    phrase: str           # "{n} ... {s}" for the verdict sentence
    jepsen: tuple[str, ...]  # what Jepsen's Kafka checker reports for it; () if nothing
    jepsen_note: str = ""    # where Jepsen's finding differs from ours


_ALL = [
    Anomaly("lost-write", "log",
            "An acknowledged send is missing from the log although a later offset of the same partition was "
            "read: the cluster confirmed the write, then lost it.",
            "{n} acknowledged write{s} lost", (":lost-write",),
            "Jepsen also counts the value under :unseen, and counts as lost the unread values of a "
            "timed-out op one of whose values was read; we count only acknowledged sends."),
    Anomaly("unseen", "log",
            "An acknowledged send was never read, and nothing after it was read either: it may be lost, or "
            "the final reads never reached it.",
            "{n} acknowledged write{s} never read", (":unseen",),
            "Jepsen's :unseen also counts the acknowledged values our lost-write reports."),
    Anomaly("inconsistent-offsets", "log",
            "Two different values were read at the same offset of a partition: consumers were handed "
            "divergent logs.",
            "{n} offset{s} read with different values", (":inconsistent-offsets",)),
    Anomaly("duplicate", "log",
            "One value appears at two offsets: a single send was stored twice.",
            "{n} value{s} stored twice", (":duplicate",)),
    Anomaly("nonmonotonic-poll", "log",
            "A consumer's poll returned an offset lower than one it had already read: its reads went backwards.",
            "{n} poll{s} that went backwards", (":nonmonotonic-poll", ":int-nonmonotonic-poll"),
            "Jepsen splits pairs across polls from pairs within one poll (int-); both keep a key's "
            "position over an assign or subscribe that names it, as we do."),
    Anomaly("poll-skip", "log",
            "A consumer's poll jumped over offsets that exist in the log: records were skipped.",
            "{n} poll{s} that skipped offsets", (":poll-skip", ":int-poll-skip"),
            "Jepsen splits pairs across polls from pairs within one poll (int-)."),
    Anomaly("nonmonotonic-send", "log",
            "Successive sends of one process to a partition got decreasing offsets.",
            "{n} send{s} given a lower offset than the process's previous one", (":nonmonotonic-send",),
            "Jepsen forgets a key's last send when an assign or subscribe drops the key, and an "
            "unread timed-out send between two sends hides their order from it; we compare across "
            "both. Sends within one op (its :int-nonmonotonic-send) we do not compare."),
    Anomaly("aborted-read", "log",
            "A value whose send definitely failed was read: a write reported as failed was in fact applied.",
            "{n} failed write{s} read back", (":G1a",)),
    Anomaly("realtime-order", "log",
            "A send acknowledged before another was invoked got a higher offset: the log order contradicts "
            "real time.",
            "{n} send{s} out of real-time order", (":G0-realtime",),
            "Only when the test sets :ww-deps (write-write edges from the log order); Jepsen "
            "reports nothing for it otherwise, and always counts G0-realtime as allowed."),
    Anomaly("read-then-lost", "log",
            "An acknowledged send that a consumer read is missing from the final reads that reach its offset "
            "(or end below it: a truncated tail): "
            "the cluster committed the write, showed it, then removed it.",
            "{n} acknowledged write{s} read, then lost", (),
            "Not Jepsen's :lost-write, which first strikes every value an ok poll returned. Jepsen "
            "reports the trace the loss leaves: :inconsistent-offsets when another value took the "
            "offset, :poll-skip when a consumer read past the hole."),
    Anomaly("divergence", "replica-diff",
            "Replicas hold different records at the same offset below their high watermarks: data the cluster "
            "had committed differs between copies of the log. differs_in: \"value\", or \"epoch\" when the copies "
            "hold the same value stamped with different leader epochs (a record's CRC does not cover its epoch).",
            "replicas diverge at {n} offset{s}",
            (), "Replica state, which Jepsen does not read; clients that read both copies show "
            ":inconsistent-offsets."),
    Anomaly("overwritten", "replica-diff",
            "A record a replica held below its high watermark before a restart was replaced by another at the "
            "same offset in the final logs: the replicas diverged there, and the restart truncated the evidence "
            "(what an unclean leader election does).",
            "{n} committed offset{s} overwritten", (),
            "Replica state over time, which Jepsen does not read; clients that read the offset before and "
            "after show :inconsistent-offsets."),
    Anomaly("missing-committed", "replica-diff",
            "Offsets below the high watermark that no replica holds: committed data is gone from every copy "
            "of the log.",
            "{n} committed offset{s} missing on every replica", (),
            "Replica state, which Jepsen does not read."),
    Anomaly("lost-acknowledged", "replica-diff",
            "An acknowledged send whose value no replica holds at any offset: the cluster confirmed the write "
            "and no copy of the log kept it.",
            "{n} acknowledged write{s} absent from every replica", (),
            "Replica state, which Jepsen does not read; its :lost-write needs a read past the offset."),
    # The txn checker (checkers/txn_anomalies.py): transactions of sends and polls. Its
    # lost-write, duplicate and inconsistent-offsets are the log checker's, counted over the
    # transactions (a value of an indefinite transaction counts as committed once a sibling
    # value was read), so they are the log checker's names with the txn checker's section.
    Anomaly("G0", "txn",
            "A cycle of write-write dependencies: two transactions' sends interleave in the logs of two "
            "keys. Kafka does not isolate a transaction's writes, so this is allowed (as Jepsen allows it).",
            "{n} write cycle{s} (G0, allowed)", (":G0",)),
    Anomaly("G0-process", "txn",
            "A write cycle through a process's own order of transactions (allowed, as G0).",
            "{n} write cycle{s} with process order (G0-process, allowed)", (":G0-process",)),
    Anomaly("G0-realtime", "txn",
            "A write cycle through real-time order: a transaction's sends land before those of one that "
            "completed before it began (allowed, as G0).",
            "{n} write cycle{s} with real-time order (G0-realtime, allowed)", (":G0-realtime",)),
    Anomaly("G1c", "txn",
            "Circular information flow: transactions each read what the next one wrote, around a cycle; "
            "read_committed consumers cannot see that.",
            "{n} circular information flow{s} (G1c)", (":G1c",)),
    Anomaly("G1c-process", "txn",
            "Circular information flow through a process's order: a transaction read a value a later "
            "transaction of the same process wrote (or a cycle of such).",
            "{n} read cycle{s} with process order (G1c-process)", (":G1c-process",)),
    Anomaly("G1c-realtime", "txn",
            "Circular information flow through real time: a transaction read a value written by one that "
            "began only after it had completed (or a cycle of such).",
            "{n} read cycle{s} with real-time order (G1c-realtime)", (":G1c-realtime",)),
    Anomaly("G1a", "txn",
            "Aborted read: a value sent by a transaction that failed (aborted) was read by a committed poll.",
            "{n} value{s} of aborted transactions read", (":G1a",),
            "Jepsen counts each read of such a value; we count the values."),
    Anomaly("precommitted-read", "txn",
            "A transaction polled a value it sent itself: read_committed consumers must not see a "
            "transaction's records before it commits.",
            "{n} transaction{s} that read their own sends", (":precommitted-read",)),
    Anomaly("txn-lost-write", "txn",
            "A committed transaction's send (the transaction ok, or indefinite with one of its values read: "
            "transactions are atomic) was never read, although its key was read past its offset, or to "
            "its end in the final phase (a read_committed read skips aborted records, so its last "
            "record can be below a lost send's offset).",
            "{n} committed transactional write{s} lost", (":lost-write",),
            "Jepsen's :lost-write under its own name; ours is named apart from the log checker's "
            "lost-write (acknowledged sends only), which runs on the same history."),
    Anomaly("txn-duplicate", "txn",
            "A value of a transaction appears at two offsets of its key.",
            "{n} transactional value{s} stored twice", (":duplicate",),
            "Jepsen's :duplicate; named apart from the log checker's duplicate, which runs on the same "
            "history."),
    Anomaly("txn-inconsistent-offsets", "txn",
            "Two different values were seen (read, or acknowledged by a committed transaction) at one offset.",
            "{n} offset{s} with different values (transactions)", (":inconsistent-offsets",),
            "Jepsen's :inconsistent-offsets; named apart from the log checker's, which runs on the same "
            "history."),
]

VOCABULARY: dict[str, Anomaly] = {a.name: a for a in _ALL}
ANOMALIES: tuple[str, ...] = tuple(VOCABULARY)


def of_checker(checker: str) -> tuple[str, ...]:
    """The names one checker emits, in table order."""
    return tuple(a.name for a in _ALL if a.checker == checker)


def explain(name: str) -> Anomaly | None:
    return VOCABULARY.get(name)

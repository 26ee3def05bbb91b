"""Kafka's own setting names, per version line, for refusing an unknown
setting before any host exists (a broker only logs a warning for a name it
does not know, and a typo would silently test the default).

`settings/<major.minor>.txt` lists every name a broker (`broker <name>`:
KafkaConfig) and a topic (`topic <name>`: LogConfig) accepts; it is printed by
`settings/names.jsh` from the version's own jars:

    jshell --class-path "$(ls build/kafka/4.1.1/lib/*.jar | tr '\\n' :)" systems/kafka/settings/names.jsh

A name that is a topic setting goes into CreateTopics (the run's topic `log`);
a name that is a broker setting goes into every broker's properties; a name
that is both (min.insync.replicas, unclean.leader.election.enable) goes to both.
"""
from __future__ import annotations

import difflib
import functools
from pathlib import Path

HERE = Path(__file__).resolve().parent / "settings"

# KRaft-only settings that a scenario written for every version sets, and what
# the ZooKeeper-era brokers (major < 3) take instead: a broker's liveness is its
# ZooKeeper session (zookeeper.session.timeout.ms; the client heartbeats at a
# third of it), so the heartbeat interval has no counterpart (None: dropped).
ZK_EQUIVALENTS = {"broker.session.timeout.ms": "zookeeper.session.timeout.ms",
                  "broker.heartbeat.interval.ms": None,
                  "unclean.leader.election.interval.ms": None}   # ZooKeeper's controller elects at once


def zk_era(version: str) -> bool:
    return int(version.split(".")[0]) < 3


def line_of(version: str) -> str:
    """"4.1.1" -> "4.1"."""
    return ".".join(version.split(".")[:2])


@functools.cache
def known(version: str) -> tuple[frozenset[str], frozenset[str]]:
    """(broker names, topic names) of a version line; the nearest listed line
    below it when that line has no list of its own."""
    lists = sorted((p for p in HERE.glob("*.txt")), key=lambda p: _num(p.stem))
    want = _num(line_of(version))
    chosen = [p for p in lists if _num(p.stem) <= want] or lists[:1]
    broker, topic = set(), set()
    for line in chosen[-1].read_text().splitlines():
        kind, _, name = line.partition(" ")
        (broker if kind == "broker" else topic).add(name)
    return frozenset(broker), frozenset(topic)


def _num(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".") if x.isdigit())


def check(settings: dict, version: str) -> None:
    """ValueError (one line) for a name that is neither a broker nor a topic setting."""
    broker, topic = known(version)
    for name in settings:
        if zk_era(version) and name in ZK_EQUIVALENTS:
            continue
        if name not in broker and name not in topic:
            near = difflib.get_close_matches(name, sorted(broker | topic), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(f"unknown Kafka {line_of(version)} setting {name!r}{hint} "
                             f"(broker and topic names: systems/kafka/settings/)")


def split(settings: dict, version: str) -> tuple[dict, dict]:
    """(broker properties, topic configs) of a run's settings; on the ZooKeeper
    era, KRaft-only names become their equivalents (ZK_EQUIVALENTS)."""
    broker, topic = known(version)
    if zk_era(version):
        settings = {ZK_EQUIVALENTS.get(k, k): v for k, v in settings.items()
                    if not (k in ZK_EQUIVALENTS and ZK_EQUIVALENTS[k] is None)}
    return ({k: v for k, v in settings.items() if k in broker},
            {k: v for k, v in settings.items() if k in topic})

"""NATS JetStream (Debian's nats-server 2.9.10, the nats-py client) as a
system under test.

Hosts: data nodes n1..nN, one nats-server each, in one JetStream cluster.
Key k is stream `log-<k>` (subject `log.<k>`) with `replicas` =
replication_factor (default min(3, nodes)) and the storage of option
`storage` (file by default; memory for the loss demonstration). Settings are
nats-server configuration fields (systems/nats/config.py).

Dumps: after the run, each node's stopped store is read back through a
standalone nats-server (systems/nats/dump.py), so the replica diff compares
the copies. Not available (`lacks` below says why), so refused at
validation: persisted high watermarks (checkpoints), scenario conditions on
LEO/HW, and clock faults.
Faults: kill, pause, partition, packet, and on the data directory (which
holds JetStream's files only) power and corrupt.
"""
from __future__ import annotations

from typing import Literal

from harness.sut import (CHECKPOINTS, CLOCK, DATA_FILES, DUMP, EVENTS, INSPECT, OFFSETS, PAUSE, PROCESS, System,
                         SystemOptions)

STORAGE = ("file", "memory")
MEMORY_NO_DUMP = ("memory storage keeps no copy once the servers stop, so there is no replica to read back "
                  "(systems/nats/dump.py reads stopped stores)")


class NatsOptions(SystemOptions):
    storage: Literal[STORAGE] = "file"
    server_binary: str = "nats-server"


def _make_db(cluster, plan, shape, options):
    from systems.nats.db import NatsDb

    return NatsDb(cluster, plan, shape, options, SYSTEM)


def check_settings(settings: dict, options: NatsOptions) -> None:
    from systems.nats.config import check_settings as check

    check(settings)


SYSTEM = System(
    name="nats",
    description="NATS JetStream (nats-server 2.9.10, nats-py): one stream per key, nodes n1..nN",
    options=NatsOptions,
    capabilities=frozenset({PROCESS, PAUSE, INSPECT, DATA_FILES, DUMP}),
    faults=frozenset({"kill", "pause", "partition", "packet", "power", "corrupt"}),
    make_db=_make_db,
    check_settings=check_settings,
    lacks_with=lambda options: {DUMP: MEMORY_NO_DUMP} if options.get("storage") == "memory" else {},
    variant_option="storage",   # scenarios expect verdicts per storage type
    variants=STORAGE,
    lacks={
        OFFSETS: "JetStream exposes no replica's Raft commit index; LEO/HW conditions need the replica's internals",
        CHECKPOINTS: "JetStream persists no high watermark per stream",
        EVENTS: "nats-server logs no truncations or ISR changes",
        CLOCK: "nats-server (Go) reads the clock without the C library, so libfaketime cannot move it",
        "fault clock": "nats-server (Go) reads the clock without the C library, so libfaketime cannot move it",
    },
)

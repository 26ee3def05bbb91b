"""NATS JetStream (Debian's nats-server 2.9.10, the nats-py client) as a
system under test.

Hosts: data nodes n1..nN, one nats-server each, in one JetStream cluster.
Key k is stream `log-<k>` (subject `log.<k>`) with `replicas` =
replication_factor (default min(3, nodes)) and the storage of option
`storage` (file by default; memory for the loss demonstration). Settings are
nats-server configuration fields (systems/nats/config.py).

Not available (`lacks` below says why), so refused at validation: dumps of
one replica (the replica diff is unknown and not counted), persisted high
watermarks (checkpoints), scenario conditions on LEO/HW, and clock faults.
Faults: kill, pause, partition, packet, and on the data directory (which
holds JetStream's files only) power and corrupt.
"""
from __future__ import annotations

from typing import Literal

from harness.sut import (CHECKPOINTS, CLOCK, DATA_FILES, DUMP, EVENTS, INSPECT, OFFSETS, PAUSE, PROCESS, System,
                         SystemOptions)

STORAGE = ("file", "memory")


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
    capabilities=frozenset({PROCESS, PAUSE, INSPECT, DATA_FILES}),
    faults=frozenset({"kill", "pause", "partition", "power", "corrupt", "packet"}),
    make_db=_make_db,
    check_settings=check_settings,
    variant_option="storage",   # scenarios expect verdicts per storage type
    variants=STORAGE,
    lacks={
        DUMP: "JetStream cannot serve one chosen replica's contents (reads go to the stream leader; "
              "direct gets are answered by whichever replica the queue group picks)",
        OFFSETS: "JetStream exposes no replica's Raft commit index; LEO/HW conditions need the replica's internals",
        CHECKPOINTS: "JetStream persists no high watermark per stream",
        EVENTS: "nats-server logs no truncations or ISR changes",
        CLOCK: "nats-server (Go) reads the clock without the C library, so libfaketime cannot move it",
        "fault clock": "nats-server (Go) reads the clock without the C library, so libfaketime cannot move it",
    },
)

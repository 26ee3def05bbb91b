"""NATS JetStream (Debian's nats-server 2.9.10, the nats-py client) as a
system under test.

Hosts: data nodes n1..nN, one nats-server each, in one JetStream cluster.
Key k is stream `log-<k>` (subject `log.<k>`) with `replicas` =
replication_factor (default min(3, nodes)) and the storage of option
`storage` (file by default; memory for the loss demonstration). Settings are
nats-server configuration fields (systems/nats/config.py).

Not available, so refused at validation: dumps of one replica (the replica
diff is unknown), persisted high watermarks (checkpoints), LEO/HW conditions
that need them, and clock faults (Go reads the clock without the C library).
"""
from __future__ import annotations

from typing import Literal

from harness.sut import DATA_FILES, INSPECT, PAUSE, PROCESS, System, SystemOptions


class NatsOptions(SystemOptions):
    storage: Literal["file", "memory"] = "file"
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
)

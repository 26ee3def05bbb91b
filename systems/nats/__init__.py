"""NATS JetStream (nats-server, the nats-py client) as a system under test.

Server versions (option `version`): `debian` (default) is the host's own
nats-server, Debian's package (2.9.10 on bookworm); `X.Y.Z` is that release
installed from the Go module proxy with `go install
github.com/nats-io/nats-server/v2@vX.Y.Z` into build/nats/X.Y.Z/ by
scripts/nats-server.sh (on demand, once; scripts/setup.sh installs the ones
named in NATS_VERSIONS). Hosts that do not share this machine's file
system (docker, ssh) get that binary uploaded. Option `sync_interval`
(2.10 and later; `always` fsyncs every write before acknowledging it) is
JetStream's flush policy, refused for older servers.

Hosts: data nodes n1..nN, one nats-server each, in one JetStream cluster.
Key k is stream `log-<k>` (subject `log.<k>`) with `replicas` =
replication_factor (default min(3, nodes)) and the storage of option
`storage` (file by default; memory for the loss demonstration). Settings are
nats-server configuration fields (systems/nats/config.py).

Dumps: after the run, each node's stopped store is read back through a
standalone nats-server (systems/nats/dump.py), so the replica diff compares
the copies. Not available (`capabilities_for` below says why), so refused at
validation: persisted high watermarks (checkpoints), scenario conditions on
LEO/HW, and clock faults.
Faults: kill, pause, partition, packet, and on the data directory (which
holds JetStream's files only) power and corrupt; disk-loss and membership
are refused (capabilities_for says why).
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import field_validator, model_validator

from harness.sut import (CHECKPOINTS, CLOCK, DATA_FILES, DUMP, EVENTS, INSPECT, META_GROUP, OFFSETS, PAUSE, PROCESS,
                         MEMBERSHIP, REMOTE_TIER, TRANSACTIONS, WIPE, Parts, System, SystemOptions)

STORAGE = ("file", "memory")
MEMORY_NO_DUMP = ("memory storage keeps no copy once the servers stop, so there is no replica to read back "
                  "(systems/nats/dump.py reads stopped stores)")


DEBIAN = "debian"          # the host's own nats-server (Debian's 2.9.10)
DEBIAN_VERSION = (2, 9, 10)
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
SYNC = re.compile(r"^(always|\d+(ms|s|m|h))$")


def version_tuple(version: str) -> tuple[int, int, int]:
    if version == DEBIAN:
        return DEBIAN_VERSION
    m = VERSION.match(version)
    return (int(m[1]), int(m[2]), int(m[3]))


class NatsOptions(SystemOptions):
    storage: Literal[STORAGE] = "file"
    server_binary: str = "nats-server"
    version: str = DEBIAN           # debian | X.Y.Z (a release from the Go module proxy)
    sync_interval: str | None = None  # JetStream's fsync policy (2.10+): always | <n>ms|s|m|h

    @field_validator("version", "sync_interval", mode="before")
    @classmethod
    def _text(cls, v):
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v != DEBIAN and not VERSION.match(v):
            raise ValueError(f"version {v!r}: give debian (the host's package) or a release X.Y.Z, e.g. 2.12.1")
        return v.removeprefix("v")

    @field_validator("sync_interval")
    @classmethod
    def _sync(cls, v: str | None) -> str | None:
        if v is not None and not SYNC.match(str(v)):
            raise ValueError(f"sync_interval {v!r}: give always or a duration such as 10s, 2m")
        return v

    @model_validator(mode="after")
    def _sync_needs_2_10(self):
        if self.sync_interval is not None and version_tuple(self.version) < (2, 10, 0):
            raise ValueError(f"sync_interval needs nats-server 2.10 or later; version {self.version} "
                             f"({'.'.join(map(str, version_tuple(self.version)))}) rejects it: "
                             f"add version: 2.10.23 (or later)")
        return self


def capabilities_for(settings: dict, options: NatsOptions) -> dict:
    """What JetStream lets the harness see and do; dumps only of file storage."""
    return {
        PROCESS: None, PAUSE: None, INSPECT: None, DATA_FILES: None, META_GROUP: None,
        DUMP: MEMORY_NO_DUMP if options.storage == "memory" else None,
        OFFSETS: "JetStream exposes no replica's Raft commit index; LEO/HW conditions need the replica's internals",
        CHECKPOINTS: "JetStream persists no high watermark per stream",
        EVENTS: "nats-server logs no truncations or ISR changes",
        CLOCK: "nats-server (Go) reads the clock without the C library, so libfaketime cannot move it",
        REMOTE_TIER: "JetStream has no tiered storage",
        TRANSACTIONS: "JetStream has no transactions spanning subjects and no consumer offsets committed "
                      "inside one (the queue workload's exactly-once processing)",
        WIPE: "not built for nats-server: a server whose JetStream store is emptied comes back under the same "
              "server name and Raft peer id, which its stream groups do not expect to have lost its log",
        MEMBERSHIP: "not built for nats-server: its peer removal and stream placement moves are not driven here",
    }


def parts() -> Parts:
    from systems.nats.client import NatsLogClient
    from systems.nats.db import NatsDb
    from systems.nats.inspector import NatsInspector

    return Parts(db=NatsDb, client=NatsLogClient, process=NatsDb, pausable=NatsDb, inspector=NatsInspector)


def check_settings(settings: dict, options: NatsOptions) -> None:
    from systems.nats.config import check_settings as check

    check(settings)


SYSTEM = System(
    name="nats",
    description="NATS JetStream (nats-server: Debian's 2.9.10 or a release, nats-py): one stream per key, "
                "nodes n1..nN",
    options=NatsOptions,
    capabilities_for=capabilities_for,
    parts=parts,
    check_settings=check_settings,
    variant_option="storage",   # scenarios expect verdicts per storage type
    variants=STORAGE,
)

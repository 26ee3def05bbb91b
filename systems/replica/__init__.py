"""The replica (this repository's `replica/`, Kafka's replication protocol in
three generations) as a system under test.

Hosts: the controller `ctl` (a role host) and brokers `n1..nN` (data nodes;
broker id i runs on n<i>). Option `era` picks the protocol generation.
Settings use Kafka's names and are checked by replica/config.py.
"""
from __future__ import annotations

from typing import Literal

from replica.protocol import ERAS
from harness.sut import (CHECKPOINTS, CLOCK, DATA_FILES, DUMP, EVENTS, INSPECT, OFFSETS, PAUSE, PROCESS, REMOTE_TIER,
                         MEMBERSHIP, TRANSACTIONS, WIPE, Parts, System, SystemOptions)

CONTROLLER = "ctl"
STORE = "store"          # tiered storage's object store (replica.remote_store), when enabled


def tiered(settings: dict) -> bool:
    """Whether the settings turn tiered storage on (then the run has a store host)."""
    return str(settings.get("remote.storage.enable", "false")).lower() in ("true", "1", "yes")


def plan_roles(settings: dict, options=None) -> dict:
    """The controller, plus the remote store's host with tiered storage."""
    return {"controller": CONTROLLER, **({"store": STORE} if tiered(settings) else {})}


class ReplicaOptions(SystemOptions):
    era: Literal[ERAS] = "epoch"


def capabilities_for(settings: dict, options: ReplicaOptions) -> dict:
    """Everything, in every era; a remote tier only with tiered storage on."""
    return {PROCESS: None, PAUSE: None, INSPECT: None, DUMP: None, CHECKPOINTS: None, EVENTS: None, CLOCK: None,
            DATA_FILES: None, OFFSETS: None, WIPE: None, MEMBERSHIP: None,
            REMOTE_TIER: None if tiered(settings) else "tiered storage is off in this run: turn it on with "
                                                       "--set remote.storage.enable=true",
            TRANSACTIONS: "the replica has no transactions and no consumer groups (Kafka's protocol before 0.11)"}


def parts() -> Parts:
    from systems.replica.client import ReplicaLogClient
    from systems.replica.db import ReplicaDb
    from systems.replica.inspector import ReplicaInspector
    from systems.replica.membership import ReplicaMembership
    from systems.replica.remote_tier import ReplicaRemoteTier

    return Parts(db=ReplicaDb, client=ReplicaLogClient, process=ReplicaDb, pausable=ReplicaDb,
                 inspector=ReplicaInspector, remote_tier=ReplicaRemoteTier, membership=ReplicaMembership)


def check_settings(settings: dict, options: ReplicaOptions) -> None:
    """Kafka setting names and types, by the replica's own rules (ValueError, one line)."""
    from replica import config

    try:
        config.build(options.era, settings)
    except config.ConfigError as e:
        raise ValueError(str(e)) from None


def setting_value(name: str, settings: dict, options: ReplicaOptions) -> float:
    """The effective value of a setting (the era's default when not set)."""
    from replica import config

    try:
        values = config.build(options.era, settings)
    except config.ConfigError as e:
        raise ValueError(str(e)) from None
    if name not in values:
        raise ValueError(f"unknown setting {name!r}")
    return float(values[name])


SYSTEM = System(
    name="replica",
    description="replica/: Kafka-style replicated log (eras hw, kip101, epoch), controller ctl + brokers n1..nN",
    options=ReplicaOptions,
    capabilities_for=capabilities_for,
    parts=parts,
    roles={"controller": CONTROLLER},
    plan_roles=plan_roles,
    fault_roles=("store",),
    code=("replica",),
    check_settings=check_settings,
    setting_value=setting_value,
    variant_option="era",
    variants=ERAS,
    default_settings=lambda rf: {"min.insync.replicas": min(2, rf)},
)

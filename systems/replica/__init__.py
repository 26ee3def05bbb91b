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
                         MEMBERSHIP, TRANSACTIONS, WIPE, System, SystemOptions)

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


def _make_db(cluster, plan, shape, options):
    from systems.replica.db import ReplicaDb

    return ReplicaDb(cluster, plan, shape, options, SYSTEM)


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
    capabilities=frozenset({PROCESS, PAUSE, INSPECT, DUMP, CHECKPOINTS, EVENTS, CLOCK, DATA_FILES, OFFSETS,
                            REMOTE_TIER, WIPE, MEMBERSHIP}),
    make_db=_make_db,
    roles={"controller": CONTROLLER},
    plan_roles=plan_roles,
    tiered=lambda settings, options: tiered(settings),
    tiered_how="--set remote.storage.enable=true",
    fault_roles=("store",),
    code=("replica",),
    check_settings=check_settings,
    setting_value=setting_value,
    variant_option="era",
    variants=ERAS,
    default_settings=lambda rf: {"min.insync.replicas": min(2, rf)},
    lacks={TRANSACTIONS: "the replica has no transactions and no consumer groups (Kafka's protocol before 0.11)"},
)

"""Registries of pluggable parts, as entry points (like pytest's plugins).

Every built-in system, backend, workload, fault and checker registers itself
in pyproject.toml exactly as a third-party package would:

    [project.entry-points."replog.systems"]
    replica = "systems.replica:SYSTEM"

and is found here with importlib.metadata. A name that is not registered is
a one-line `RegistryError` listing the known names.

Groups and what an entry point names:
- `replog.systems`: a `harness.sut.System`
- `replog.backends`: a module with `make_cluster(spec, run_id, record, work_dir)` (harness/cluster/)
- `replog.workloads`: a `workloads.Workload`
- `replog.faults`: a `nemesis.fault.FaultKind`
- `replog.checkers`: a `checkers.registry.Checker`
"""
from __future__ import annotations

import functools
from importlib.metadata import entry_points
from typing import Any

SYSTEMS = "replog.systems"
BACKENDS = "replog.backends"
WORKLOADS = "replog.workloads"
FAULTS = "replog.faults"
CHECKERS = "replog.checkers"
GROUPS = (SYSTEMS, BACKENDS, WORKLOADS, FAULTS, CHECKERS)
_KIND = {SYSTEMS: "system", BACKENDS: "backend", WORKLOADS: "workload", FAULTS: "fault", CHECKERS: "checker"}


class RegistryError(LookupError):
    """An unknown or broken registration; one line."""


@functools.cache
def _entries(group: str) -> dict:
    return {ep.name: ep for ep in entry_points(group=group)}


def names(group: str) -> list[str]:
    """Registered names of a group, sorted."""
    return sorted(_entries(group))


@functools.cache
def load(group: str, name: str) -> Any:
    """The object registered under name; RegistryError if there is none."""
    ep = _entries(group).get(name)
    kind = _KIND.get(group, group)
    if ep is None:
        known = ", ".join(names(group)) or "none"
        raise RegistryError(f"unknown {kind} {name!r} (known: {known}); a new one is registered in "
                            f"pyproject.toml [project.entry-points.\"{group}\"] and installed with "
                            f"`pip install -e .` (scripts/setup.sh)")
    try:
        return ep.load()
    except (ImportError, AttributeError) as e:
        raise RegistryError(f"{kind} {name!r} ({ep.value}) cannot be loaded: {e}") from None


def load_all(group: str) -> dict[str, Any]:
    return {n: load(group, n) for n in names(group)}


def system(name: str):
    return load(SYSTEMS, name)


def backend(name: str):
    return load(BACKENDS, name)


def workload(name: str):
    return load(WORKLOADS, name)


def fault(name: str):
    return load(FAULTS, name)


def checker(name: str):
    return load(CHECKERS, name)

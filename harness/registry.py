"""Registries of pluggable parts (like pytest's plugins): systems, backends,
workloads, faults and checkers, each found by name.

Three sources, in this order:
- the built-ins, registered here in code (`BUILTINS`; systems: every package
  `systems/<name>/` whose `__init__` defines `SYSTEM`), so a plain checkout that
  was never pip-installed knows them;
- entry points of installed packages, exactly as a third party registers:

      [project.entry-points."replog.systems"]
      mysystem = "mypackage.adapter:SYSTEM"

- `register(group, name, obj)` at run time (a test's own checker, a plugin).

Every object is checked against its group's protocol when it is loaded or
registered (as pluggy verifies a hook implementation against its spec): a
missing attribute, a name that is not the registered one, a capability that
harness.sut does not know, is a one-line `RegistryError`, and so is an
unknown name (listing the known ones). A system's objects are checked too:
each class of its `Parts` against its Protocol in harness.sut (every method,
by name, async or not, and the arguments the harness passes), so a missing or
misnamed method is refused when the system is registered, not when a run
first calls it.

Groups and what is registered:
- `replog.systems`: a `harness.sut.System`
- `replog.backends`: a module with `make_cluster(spec, run_id, record, work_dir, roles)` (harness/cluster/)
- `replog.workloads`: a `workloads.Workload`
- `replog.faults`: a `nemesis.fault.FaultKind`
- `replog.checkers`: a `checkers.checker.Checker`
"""
from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

SYSTEMS = "replog.systems"
BACKENDS = "replog.backends"
WORKLOADS = "replog.workloads"
FAULTS = "replog.faults"
CHECKERS = "replog.checkers"
GROUPS = (SYSTEMS, BACKENDS, WORKLOADS, FAULTS, CHECKERS)
_KIND = {SYSTEMS: "system", BACKENDS: "backend", WORKLOADS: "workload", FAULTS: "fault", CHECKERS: "checker"}

# The system a spec, a campaign or a command gets when it names none: the only
# place outside systems/<name>/ that names a system.
DEFAULT_SYSTEM = "replica"

# The built-ins ("module:attribute", or a module), imported only when asked for.
BUILTINS: dict[str, dict[str, str]] = {
    BACKENDS: {"netns": "harness.cluster.netns", "docker": "harness.cluster.docker",
               "ssh": "harness.cluster.ssh"},
    WORKLOADS: {"log": "workloads.log:WORKLOAD", "queue": "workloads.queue:WORKLOAD"},
    FAULTS: {"kill": "nemesis.kill:KILL", "pause": "nemesis.pause:PAUSE_FAULT",
             "partition": "nemesis.partition:PARTITION", "power": "nemesis.power:POWER",
             "corrupt": "nemesis.corrupt:CORRUPT", "packet": "nemesis.packet:PACKET",
             "clock": "nemesis.clock:CLOCK_FAULT", "remote-store": "nemesis.remote_store:REMOTE_STORE",
             "disk-loss": "nemesis.disk_loss:DISK_LOSS", "membership": "nemesis.membership:MEMBERSHIP_FAULT"},
    CHECKERS: {"log": "checkers.log_anomalies:CHECKER", "replica-diff": "checkers.replica_diff:CHECKER",
               "linearizability": "checkers.linearizability:CHECKER", "txn": "checkers.txn_anomalies:CHECKER",
               "scenario": "scenarios.results:CHECKER"},
}
SYSTEMS_PACKAGE = "systems"  # systems/<name>/__init__.py defines SYSTEM

_added: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}


class RegistryError(LookupError):
    """An unknown or broken registration; one line."""


def _builtin_systems() -> dict[str, str]:
    root = Path(__file__).resolve().parent.parent / SYSTEMS_PACKAGE
    return {m.name: f"{SYSTEMS_PACKAGE}.{m.name}:SYSTEM"
            for m in pkgutil.iter_modules([str(root)]) if m.ispkg}


@functools.cache
def _sources(group: str) -> dict[str, str]:
    """name -> "module[:attribute]": the built-ins, then installed entry points.

    An entry point that repeats a built-in's name must name the same object."""
    found = dict(_builtin_systems() if group == SYSTEMS else BUILTINS.get(group, {}))
    for ep in entry_points(group=group):
        if ep.name in found and found[ep.name] != ep.value:
            raise RegistryError(f"{_KIND[group]} {ep.name!r} is registered twice: built in as "
                                f"{found[ep.name]} and by an installed package as {ep.value}")
        found.setdefault(ep.name, ep.value)
    return found


def names(group: str) -> list[str]:
    """Registered names of a group, sorted."""
    return sorted({*_sources(group), *_added[group]})


@functools.cache
def _load_source(group: str, name: str) -> Any:
    value = _sources(group)[name]
    module, _, attr = value.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise RegistryError(f"{_KIND[group]} {name!r} ({value}) cannot be loaded: {e}") from None
    verify(group, name, obj)
    return obj


def load(group: str, name: str) -> Any:
    """The object registered under name; RegistryError if there is none."""
    if name in _added[group]:
        return _added[group][name]
    if name not in _sources(group):
        known = ", ".join(names(group)) or "none"
        raise RegistryError(f"unknown {_KIND.get(group, group)} {name!r} (known: {known}); a new one is "
                            f"registered in harness/registry.py (built in) or as an entry point "
                            f"[project.entry-points.\"{group}\"]")
    return _load_source(group, name)


def load_all(group: str) -> dict[str, Any]:
    return {n: load(group, n) for n in names(group)}


def register(group: str, name: str, obj: Any) -> None:
    """Register obj at run time (after checking it); a name that is taken is an error."""
    if group not in GROUPS:
        raise RegistryError(f"unknown registry group {group!r} (known: {', '.join(GROUPS)})")
    if name in names(group):
        raise RegistryError(f"{_KIND[group]} {name!r} is already registered")
    verify(group, name, obj)
    _added[group][name] = obj


def unregister(group: str, name: str) -> None:
    """Forget a run-time registration (built-ins and entry points stay)."""
    _added[group].pop(name, None)


# -- the protocols: what a registered object must have ------------------------
# attribute -> what it must be: "str", "callable", "caps" (capability names of
# harness.sut), "module" (a backend is a module). The full types are in the
# modules named in the docstring above; these are the parts the harness calls.
PROTOCOLS: dict[str, dict[str, str]] = {
    SYSTEMS: {"name": "str", "description": "str", "options": "options", "capabilities_for": "callable",
              "parts": "callable", "capabilities_in": "callable", "make_db": "callable", "host_plan": "callable",
              "parse_options": "callable"},
    BACKENDS: {"make_cluster": "callable"},
    WORKLOADS: {"name": "str", "description": "str", "make": "callable"},
    FAULTS: {"name": "str", "start": "str", "stop": "str", "colour": "str", "make": "callable",
             "needs": "caps"},
    CHECKERS: {"name": "str", "description": "str", "check": "callable", "needs": "caps"},
}
NAMED = (SYSTEMS, WORKLOADS, FAULTS, CHECKERS)  # their `name` must be the registered name
BACKEND_PARAMS = ("spec", "run_id", "record", "work_dir", "roles")


def verify(group: str, name: str, obj: Any) -> None:
    """RegistryError (one line) unless obj has what its group's protocol asks."""
    from harness.sut import CAPABILITIES, SystemOptions

    kind = _KIND[group]
    for attr, what in PROTOCOLS[group].items():
        if not hasattr(obj, attr):
            raise RegistryError(f"{kind} {name!r}: {type(obj).__name__} has no {attr!r} "
                                f"(the {kind} protocol: {', '.join(PROTOCOLS[group])})")
        value = getattr(obj, attr)
        wrong = (what == "str" and not isinstance(value, str)
                 or what == "callable" and not callable(value)
                 or what == "options" and not (isinstance(value, type) and issubclass(value, SystemOptions)))
        if wrong:
            raise RegistryError(f"{kind} {name!r}: {attr} must be {what}, not {type(value).__name__}")
        if what == "caps":
            unknown = sorted(set(value) - set(CAPABILITIES))
            if isinstance(value, str) or unknown:
                raise RegistryError(f"{kind} {name!r}: {attr} names unknown capabilities {unknown or value!r} "
                                    f"(known: {', '.join(CAPABILITIES)})")
    if group in NAMED and obj.name != name:
        raise RegistryError(f"{kind} {name!r}: registered under {name!r} but its name is {obj.name!r}")
    if group == BACKENDS:
        params = list(inspect.signature(obj.make_cluster).parameters)
        if params[:len(BACKEND_PARAMS)] != list(BACKEND_PARAMS):
            raise RegistryError(f"backend {name!r}: make_cluster{tuple(params)} must take "
                                f"({', '.join(BACKEND_PARAMS)})")
    if group == CHECKERS and getattr(obj, "spark", None) is not None and not isinstance(obj.spark, str):
        raise RegistryError(f"checker {name!r}: spark must name its driver module (a str), "
                            f"not {type(obj.spark).__name__}")
    if group == SYSTEMS:
        fields = obj.options.model_fields
        if obj.variant_option is not None and obj.variant_option not in fields:
            raise RegistryError(f"system {name!r}: variant_option {obj.variant_option!r} is not one of its "
                                f"options ({', '.join(fields) or 'none'})")
        _verify_system_parts(name, obj)


def _verify_system_parts(name: str, system: Any) -> None:
    """`capabilities_for` names known capabilities (with the default settings and options), and
    the classes of `parts()` follow the Protocols of harness.sut: the DB and client always, each
    capability's object when the system has it by default, and any other class it declares."""
    from harness.sut import (CAPABILITIES, META_GROUP, PART_OF, PART_PROTOCOLS, TRANSACTIONS, WIPE, MetaGroup, Parts,
                             Transactional, Wipeable)

    try:
        declared = system.capabilities_for(system.default_settings(3), system.parse_options({}))
    except Exception as e:
        raise RegistryError(f"system {name!r}: capabilities_for(settings, options) failed with the defaults: "
                            f"{type(e).__name__}: {e}") from None
    unknown = sorted(set(declared) - set(CAPABILITIES)) if isinstance(declared, dict) else declared
    if unknown:
        raise RegistryError(f"system {name!r}: capabilities_for names unknown capabilities {unknown!r} "
                            f"(known: {', '.join(CAPABILITIES)})")
    wrong = sorted(c for c, why in declared.items() if why is not None and not isinstance(why, str))
    if wrong:
        raise RegistryError(f"system {name!r}: capabilities_for must map {wrong[0]!r} to None (it has it) or "
                            f"a reason (str), not {type(declared[wrong[0]]).__name__}")
    try:
        parts = system.parts()
    except Exception as e:
        raise RegistryError(f"system {name!r}: parts() failed: {type(e).__name__}: {e}") from None
    if not isinstance(parts, Parts):
        raise RegistryError(f"system {name!r}: parts() must return a harness.sut.Parts, not {type(parts).__name__}")
    has = {c for c, why in declared.items() if why is None}
    for capability in sorted(has):
        if getattr(parts, PART_OF[capability]) is None:
            raise RegistryError(f"system {name!r}: it has {capability!r} but its parts() declare no "
                                f"{PART_OF[capability]} class")
    for part, protocol in PART_PROTOCOLS.items():
        cls = getattr(parts, part)
        if cls is not None:
            _conforms(name, cls, protocol)
    if META_GROUP in has:
        _conforms(name, parts.inspector, MetaGroup)
    if TRANSACTIONS in has:
        _conforms(name, parts.db, Transactional)
    if WIPE in has:
        _conforms(name, parts.db, Wipeable)


def protocol_methods(protocol: type) -> dict[str, Any]:
    """The methods a Protocol declares (in its own body; not the attributes)."""
    return {n: f for n, f in vars(protocol).items() if inspect.isfunction(f) and not n.startswith("_")}


def _conforms(name: str, cls: type, protocol: type) -> None:
    """RegistryError (one line) unless cls has every method of protocol, async where it is, taking the
    arguments the harness passes (by position and name; more only with defaults)."""
    where = f"system {name!r}: {cls.__name__}"
    methods = protocol_methods(protocol)
    for method, spec in methods.items():
        impl = getattr(cls, method, None)
        if impl is None or not callable(impl):
            raise RegistryError(f"{where} has no method {method!r} (the {protocol.__name__} protocol of "
                                f"harness/sut.py: {', '.join(methods)})")
        if inspect.iscoroutinefunction(spec) != inspect.iscoroutinefunction(impl):
            kind = "async def" if inspect.iscoroutinefunction(spec) else "def (not async)"
            raise RegistryError(f"{where}.{method} must be {kind}, as {protocol.__name__}.{method}")
        wanted = list(inspect.signature(spec).parameters.values())[1:]
        try:
            given = list(inspect.signature(impl).parameters.values())[1:]
        except (TypeError, ValueError):
            continue
        if any(p.kind is p.VAR_POSITIONAL for p in given):
            continue
        named = [p for p in given if p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)]
        call = f"{method}({', '.join(p.name for p in wanted)})"
        for i, p in enumerate(wanted):
            if i >= len(named) or named[i].name != p.name:
                have = f"{method}({', '.join(q.name for q in given)})"
                raise RegistryError(f"{where}.{have} does not take the arguments {protocol.__name__}.{call} "
                                    f"(argument {i + 1} is {p.name!r})")
        extra = [p.name for p in given[len(wanted):] if p.default is p.empty and p.kind not in (p.VAR_KEYWORD,)]
        if extra:
            raise RegistryError(f"{where}.{method} needs {', '.join(extra)}, which {protocol.__name__}.{call} "
                                f"does not pass; give them defaults")


def faults_for(capabilities: Any) -> list[str]:
    """Names of the registered faults these capabilities (harness.sut.Capabilities) support."""
    return [n for n in names(FAULTS) if capabilities.supports(load(FAULTS, n))]


def system(name: str | None = None):
    """A registered system; None: the default one."""
    return load(SYSTEMS, name or DEFAULT_SYSTEM)


def backend(name: str):
    return load(BACKENDS, name)


def workload(name: str):
    return load(WORKLOADS, name)


def fault(name: str):
    return load(FAULTS, name)


def checker(name: str):
    return load(CHECKERS, name)

"""Every registered system against the seam (harness/sut.py): its System passes
the registry's protocol check, its adapter's DB, capability objects and client
are what the seam's protocols say, the capabilities it has are the objects it
hands out, and the faults it supports are those whose needs it has; a system
whose objects miss a Protocol method is refused at registration, in one line. The DB
is made on a real backend's cluster object (netns) that is never created: no
host, no process, no root."""
from __future__ import annotations

import dataclasses

import pytest

from harness import registry
from harness.cleanup import RunRecord
from harness.cluster.netns import host_addresses
from harness.remote.local import LocalRemote
from harness.spec import build_spec
from harness.sut import (CAPABILITIES, CHECKPOINTS, DB, DUMP, EVENTS, INSPECT, PAUSE, PROCESS, REMOTE_TIER, Inspector,
                         LogClient, Pausable, Process, RemoteTier, RunShape, System, Unsupported, capabilities_of)

pytestmark = pytest.mark.unit

SYSTEMS = registry.names(registry.SYSTEMS)


def test_the_built_in_systems_are_known_without_an_install():
    assert {"replica", "nats"} <= set(SYSTEMS)
    assert registry.DEFAULT_SYSTEM in SYSTEMS
    assert registry.system() is registry.system(registry.DEFAULT_SYSTEM)


@pytest.fixture(params=SYSTEMS)
def db(request, tmp_path):
    system = registry.system(request.param)
    spec = build_spec(system=request.param, nodes=3)
    plan = system.host_plan(spec.nodes, spec.options(), spec.settings)
    record = RunRecord("conformance", run_dir=tmp_path / "runs")
    cluster = registry.backend("netns").make_cluster(spec, "conformance", record, str(tmp_path / "work"),
                                                     tuple(plan.roles.values()))
    # the addresses create() would give the hosts, without their namespaces (nothing runs)
    for host, address in host_addresses(spec.subnet, spec.nodes, tuple(plan.roles.values())).items():
        cluster.remotes[host] = LocalRemote(host, address)
    shape = RunShape(nodes=spec.nodes, keys=spec.keys, replication_factor=spec.replication_factor,
                     settings=spec.settings)
    return system.make_db(cluster, plan, shape, spec.options())


def test_a_system_db_follows_the_seam(db):
    system, capabilities = db.system, capabilities_of(db)
    assert isinstance(system, System) and isinstance(db, DB)
    assert set(capabilities) == set(CAPABILITIES) and capabilities.available
    assert db.nodes == ["n1", "n2", "n3"] and set(db.nodes) <= set(db.hosts)
    for capability, obj, protocol in ((PROCESS, db.process, Process), (PAUSE, db.pausable, Pausable),
                                      (REMOTE_TIER, db.remote_tier, RemoteTier)):
        assert (obj is not None) == capabilities.has(capability), capability
        assert obj is None or isinstance(obj, protocol), capability
    inspects = {INSPECT, DUMP, CHECKPOINTS, EVENTS} & capabilities.available
    assert (db.inspector is not None) == bool(inspects)
    assert db.inspector is None or isinstance(db.inspector, Inspector)
    assert isinstance(db.client(), LogClient)
    parts = system.parts()   # the classes registration checked are the objects the run gets
    assert type(db) is parts.db and type(db.client()) is parts.client
    assert db.inspector is None or type(db.inspector) is parts.inspector


def test_a_system_supports_exactly_the_faults_whose_needs_it_has(db):
    system, capabilities = db.system, capabilities_of(db)
    names = registry.names(registry.FAULTS)
    assert names
    for name in names:
        kind = registry.fault(name)
        if set(kind.needs) <= capabilities.available:
            capabilities.require_fault(kind)
            assert name in registry.faults_for(capabilities)
        else:
            with pytest.raises(Unsupported, match=rf"system '{system.name}' does not support 'fault {name}'"):
                capabilities.require_fault(kind)
            assert name not in registry.faults_for(capabilities)


def test_capabilities_depend_on_the_run_configuration():
    """One function per system says what a configuration can do, and why not."""
    replica, nats = registry.system("replica"), registry.system("nats")
    off = replica.capabilities_in({})
    assert not off.has(REMOTE_TIER) and "remote.storage.enable=true" in off[REMOTE_TIER]
    assert replica.capabilities_in({"remote.storage.enable": "true"}).has(REMOTE_TIER)
    assert nats.capabilities_in({}, {"storage": "file"}).has(DUMP)
    memory = nats.capabilities_in({}, {"storage": "memory"})
    assert not memory.has(DUMP) and "memory storage" in memory[DUMP]
    with pytest.raises(Unsupported, match="does not support 'checkpoints'.*no high watermark"):
        nats.capabilities_in().require(CHECKPOINTS, "a test")


def test_system_keeps_no_capability_field_besides_capabilities_for():
    names = {f.name for f in dataclasses.fields(System)}
    assert "capabilities_for" in names
    assert names & {"capabilities", "lacks", "lacks_with", "tiered", "tiered_how", "faults"} == set()


def test_a_system_variants_are_values_of_its_variant_option():
    for name in SYSTEMS:
        system = registry.system(name)
        if system.variant_option is None:
            continue
        assert system.variants, name
        for variant in system.variants:
            options = system.parse_options(system.variant_options(variant))
            assert getattr(options, system.variant_option) == variant


def test_registration_checks_a_system_against_the_protocol():
    replica = registry.system("replica")
    with pytest.raises(registry.RegistryError, match="registered under 'other'"):
        registry.register(registry.SYSTEMS, "other", replica)
    bad = dataclasses.replace(replica, name="bad", capabilities_for=lambda settings, options: {"teleport": None})
    with pytest.raises(registry.RegistryError, match="unknown capabilities"):
        registry.register(registry.SYSTEMS, "bad", bad)
    assert not {"other", "bad"} & set(registry.names(registry.SYSTEMS))


def _without(cls: type, method: str, **instead) -> type:
    """A copy of cls without one of its methods (and with `instead`)."""
    body = {k: v for k, v in vars(cls).items() if k not in (method, "__dict__", "__weakref__")}
    return type(f"Broken{cls.__name__}", cls.__bases__, {**body, **instead})


def _broken(name: str, **parts) -> System:
    replica = registry.system("replica")
    good = replica.parts()
    return dataclasses.replace(replica, name=name, parts=lambda: dataclasses.replace(good, **parts))


def _close(self) -> None: ...


async def _state_of_host(self, host: str, timeout: float = 0.5): ...


@pytest.mark.parametrize("name, parts, refusal", [
    ("no-close", lambda p: {"inspector": _without(p.inspector, "close")},
     r"system 'no-close': BrokenReplicaInspector has no method 'close' \(the Inspector protocol"),
    ("misnamed", lambda p: {"inspector": _without(p.inspector, "close", clos=_close)},
     r"BrokenReplicaInspector has no method 'close'"),
    ("not-async", lambda p: {"inspector": _without(p.inspector, "close", close=_close)},
     r"BrokenReplicaInspector.close must be async def, as Inspector.close"),
    ("wrong-argument", lambda p: {"inspector": _without(p.inspector, "state", state=_state_of_host)},
     r"BrokenReplicaInspector.state\(host.*does not take the arguments Inspector.state\(node, timeout\)"),
    ("no-more-dumps", lambda p: {"inspector": _without(p.inspector, "more_dumps")},
     r"has no method 'more_dumps'"),
    ("no-resume", lambda p: {"pausable": type("Stopper", (), {"pause": lambda self, node: None})},
     r"system 'no-resume': Stopper has no method 'resume' \(the Pausable protocol of harness/sut.py: pause, resume\)"),
    ("no-send", lambda p: {"client": _without(p.client, "send")}, r"BrokenReplicaLogClient has no method 'send'"),
    ("no-collect", lambda p: {"db": _without(p.db, "collect")}, r"BrokenReplicaDb has no method 'collect'"),
    ("no-pausable", lambda p: {"pausable": None}, r"it has 'pause' but its parts\(\) declare no pausable class"),
])
def test_a_system_missing_a_protocol_method_is_refused_at_registration_in_one_line(name, parts, refusal):
    broken = _broken(name, **parts(registry.system("replica").parts()))
    with pytest.raises(registry.RegistryError, match=refusal) as e:
        registry.register(registry.SYSTEMS, name, broken)
    assert "\n" not in str(e.value)
    assert name not in registry.names(registry.SYSTEMS)


def test_the_unbroken_copy_registers():
    """The check can pass: the same copy with nothing removed is accepted."""
    whole = _broken("whole")
    registry.register(registry.SYSTEMS, "whole", whole)
    try:
        assert registry.system("whole") is whole
    finally:
        registry.unregister(registry.SYSTEMS, "whole")


def test_every_registered_part_passes_its_protocol():
    for group in registry.GROUPS:
        assert registry.load_all(group), group  # each loads, and registry.verify passed on it

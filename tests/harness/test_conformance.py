"""Every registered system against the seam (harness/sut.py): its System passes
the registry's protocol check, its adapter's DB, capability objects and client
are what the seam's protocols say, the capabilities it declares are the objects
it hands out, and the faults it supports are those whose needs it has. The DB
is made on a real backend's cluster object (netns) that is never created: no
host, no process, no root."""
from __future__ import annotations

import pytest

from harness import registry
from harness.cleanup import RunRecord
from harness.cluster.netns import host_addresses
from harness.remote.local import LocalRemote
from harness.spec import build_spec
from harness.sut import (CAPABILITIES, CHECKPOINTS, DB, DUMP, EVENTS, INSPECT, PAUSE, PROCESS, Inspector, LogClient,
                         Pausable, Process, RunShape, System, Unsupported)

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
    system = db.system
    assert isinstance(system, System) and isinstance(db, DB)
    assert system.capabilities <= set(CAPABILITIES)
    assert db.nodes == ["n1", "n2", "n3"] and set(db.nodes) <= set(db.hosts)
    for capability, obj, protocol in ((PROCESS, db.process, Process), (PAUSE, db.pausable, Pausable)):
        assert (obj is not None) == system.has(capability), capability
        assert obj is None or isinstance(obj, protocol), capability
    inspects = {INSPECT, DUMP, CHECKPOINTS, EVENTS} & system.capabilities
    assert (db.inspector is not None) == bool(inspects)
    assert db.inspector is None or isinstance(db.inspector, Inspector)
    assert isinstance(db.client(), LogClient)
    assert [name for name in system.lacks if name not in CAPABILITIES and not name.startswith("fault ")] == []


def test_a_system_supports_exactly_the_faults_whose_needs_it_has(db):
    system = db.system
    for name in registry.names(registry.FAULTS):
        kind = registry.fault(name)
        if set(kind.needs) <= system.capabilities:
            system.require_fault(kind)
            assert name in registry.faults_for(system)
        else:
            with pytest.raises(Unsupported, match=rf"system '{system.name}' does not support 'fault {name}'"):
                system.require_fault(kind)
            assert name not in registry.faults_for(system)


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
    import dataclasses

    bad = dataclasses.replace(replica, name="bad", capabilities=frozenset({"teleport"}))
    with pytest.raises(registry.RegistryError, match="unknown capabilities"):
        registry.register(registry.SYSTEMS, "bad", bad)
    lying = dataclasses.replace(replica, name="lying", capabilities=frozenset({PROCESS}),
                                faults=frozenset({"kill", "pause"}))
    with pytest.raises(registry.RegistryError, match="lists fault 'pause' but lacks"):
        registry.register(registry.SYSTEMS, "lying", lying)
    assert not {"other", "bad", "lying"} & set(registry.names(registry.SYSTEMS))


def test_every_registered_part_passes_its_protocol():
    for group in registry.GROUPS:
        assert registry.load_all(group), group  # each loads, and registry.verify passed on it

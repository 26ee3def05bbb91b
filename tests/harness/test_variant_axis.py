"""`variant` is the generic axis of runs, scenarios and campaigns (`era` stays an
alias), system options come through a generic `--option k=v`, and outside
systems/<name>/ no module names a system but the registry's one default."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import registry
from harness.campaign.matrix import expand
from harness.campaign.spec import CampaignError, load_campaign
from harness.spec import SpecError, build_spec

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
GENERIC = ("harness", "nemesis", "checkers", "reports", "workloads")


def test_variant_and_its_alias_era_set_the_system_variant_option():
    for system in registry.names(registry.SYSTEMS):
        sut = registry.system(system)
        for variant in sut.variants:
            by_variant = build_spec(system=system, variant=variant)
            assert by_variant.variant == variant == build_spec(system=system, era=variant).variant
            assert by_variant.system_options[sut.variant_option] == variant
    with pytest.raises(SpecError, match="variant 'hw' and era 'epoch' differ"):
        build_spec(variant="hw", era="epoch")


def test_option_flags_reach_the_system_options(tmp_path):
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text("era: hw\nsystem_options: {}\n")
    spec = build_spec(str(spec_file), variant="kip101")  # the flag replaces the file's variant
    assert spec.variant == "kip101"
    assert build_spec(system_options={"era": "hw"}).variant == "hw"


def harness(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO)


@pytest.mark.parametrize("flag", ["--variant", "--era"])
def test_run_takes_variant_and_era_with_one_line_errors(flag):
    out = harness("run", flag, "kafka3", "--time-limit", "1")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "era: got 'kafka3'" in out.stderr and "'hw', 'kip101' or 'epoch'" in out.stderr


def test_option_is_checked_by_the_system_options_model():
    out = harness("run", "--option", "bogus=1", "--time-limit", "1")
    assert out.returncode == 2 and "system_options: bogus: unknown field" in out.stderr
    out = harness("run", "--option", "novalue", "--time-limit", "1")
    assert out.returncode == 2 and "--option 'novalue': expected key=value" in out.stderr


def test_campaign_variants_and_their_alias_eras_plan_the_same_cells(tmp_path):
    plans = []
    for axis, where in (("variants", "variant"), ("eras", "era")):
        path = tmp_path / f"{axis}.yaml"
        path.write_text(f"systems: [replica, nats]\n{axis}: [hw, epoch, memory]\nnemesis: [kill]\n"
                        f"scenarios: [hw-data-loss]\n"
                        f"expect: [{{where: {{{where}: hw}}, verdict: invalid}}]\n")
        plans.append([(c.id, c.system, c.variant, c.expect) for c in expand(load_campaign(path), "salt")])
    assert plans[0] == plans[1]
    assert ("replica-hw-kill", "replica", "hw", "invalid") in plans[0]
    assert ("nats-memory-kill", "nats", "memory", "valid") in plans[0]   # a system runs its own variants
    assert ("scenario-hw-data-loss-hw", "replica", "hw", "invalid") in plans[0]
    both = tmp_path / "both.yaml"
    both.write_text("variants: [hw]\neras: [hw]\n")
    with pytest.raises(CampaignError, match="`variants` or its alias `eras`, not both"):
        load_campaign(both)


def test_no_generic_module_names_a_system_but_the_registry_default():
    systems = set(registry.names(registry.SYSTEMS))
    found = []
    for pkg in GENERIC:
        for path in (REPO / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in systems:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert found == [f"harness/registry.py:{_default_line()} {registry.DEFAULT_SYSTEM!r}"]


def _default_line() -> int:
    text = (REPO / "harness" / "registry.py").read_text()
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("DEFAULT_SYSTEM ="))

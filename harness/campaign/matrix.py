"""Expand a campaign file into cells and runs, in a stable order.

Order: systems, then workloads, variants, nemesis sets, backends, profiles
(random runs); then scenarios, variants, backends; the order of each list is the
file's. A system runs the campaign's variants that are its own, or its default
variant when none is (`spec.system_variants`). A scenario runs on its script's
system, in a variant its library entry does not assert (and no `expect` rule
names) it is left out: its script is not meant for that variant. A
cell's id is made of its axis values only, so the same cell has the same id
in every campaign of the file (that is what the comparison joins on), and a
run's id adds its seed.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

from harness import registry
from harness.campaign.spec import CampaignFile, ExpectRule, profile_runs_in, system_variants


@dataclass
class Cell:
    id: str
    kind: str                       # "run" (random faults) or "scenario"
    system: str
    variant: str | None             # None: the system's default
    nemesis: list[str]
    workload: str | None
    scenario: str | None
    backend: str
    expect: str                     # valid | invalid | any | scenario (the library's verdict for the variant)
    why: str = ""
    checkers: list[str] | None = None                # judge runs on these checkers only (None: all)
    runs: list[dict] = field(default_factory=list)   # {"id", "seed", "index"}
    profile: str | None = None                       # the campaign's `profiles` axis (None: none)

    @property
    def label(self) -> str:
        """system/variant/nemesis (random runs) or scenario/variant: the JUnit classname."""
        if self.kind == "scenario":
            return "/".join(x for x in (self.scenario, self.variant) if x)
        parts = [self.system, self.variant, "+".join(self.nemesis) or "none"]
        if self.workload and self.workload != "log":
            parts.append(self.workload)
        if self.backend != "netns":
            parts.append(self.backend)
        if self.profile:
            parts.append(self.profile)
        return "/".join(p for p in parts if p)

    def axes(self) -> dict:
        return {"system": self.system, "variant": self.variant, "nemesis": self.nemesis, "workload": self.workload,
                "scenario": self.scenario, "backend": self.backend, "profile": self.profile}

    def as_json(self) -> dict:
        return {**asdict(self), "label": self.label}


def cell_id(*parts) -> str:
    return "-".join(str(p) for p in parts if p not in (None, ""))


def derived_seed(salt: str, cell: str, index: int) -> int:
    """A seed fixed by the plan: same salt, cell and index -> same seed."""
    digest = hashlib.sha256(f"{salt}/{cell}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1) + 1


def matching_rule(campaign: CampaignFile, axes: dict) -> ExpectRule | None:
    """The first rule whose `where` matches the cell."""
    for rule in campaign.expect:
        if all(_matches(axes.get(k), want) for k, want in rule.where.items()):
            return rule
    return None


def _matches(value, want) -> bool:
    if isinstance(value, list):  # nemesis sets compare as sets
        return sorted(value) == sorted(want if isinstance(want, list) else [want])
    if isinstance(want, list):
        return value in want
    return value == want


def expand(campaign: CampaignFile, salt: str, runs_per_cell: int | None = None) -> list[Cell]:
    """Every cell of the matrix with its runs (seeds), in the stable order."""
    count = runs_per_cell or (len(campaign.seeds) if campaign.seeds else campaign.runs)
    cells: list[Cell] = []
    for system in campaign.systems:
        variants = system_variants(campaign, registry.system(system))
        for workload in campaign.workloads:
            for variant in variants:
                for nemesis in campaign.nemesis:
                    for backend in campaign.backends:
                        for profile in list(campaign.profiles) or [None]:
                            if not profile_runs_in(campaign, profile, variant):
                                continue
                            cid = cell_id(system, workload if workload != "log" else None, variant,
                                          "+".join(nemesis) or "none", backend if backend != "netns" else None,
                                          profile)
                            cells.append(_cell(campaign, cid, "run", system, variant, nemesis, workload, None,
                                               backend, profile))
    for scenario in campaign.scenarios:
        system, own = _scenario_system(scenario)
        own = [v for v in own if v in campaign.variants] or own  # the campaign's, where it names some
        for variant in own or [v for v in system_variants(campaign, registry.system(system)) if v is not None]:
            for backend in campaign.backends:
                cid = cell_id("scenario", scenario, variant, backend if backend != "netns" else None)
                cell = _cell(campaign, cid, "scenario", system, variant, [], None, scenario, backend)
                if cell.expect != "any" or matching_rule(campaign, cell.axes()) is not None:  # a variant the library does not assert, no rule: left out
                    cells.append(cell)
    for cell in cells:
        for i in range(count):
            if campaign.seeds and i < len(campaign.seeds) and cell.kind == "run":
                seed = campaign.seeds[i]
            elif cell.kind == "run":
                seed = derived_seed(salt, cell.id, i)
            else:
                seed = None  # a scenario is a fixed script: its runs are repetitions
            tag = f"seed-{seed}" if seed is not None else f"run-{i + 1}"
            cell.runs.append({"id": f"{cell.id}/{tag}", "seed": seed, "index": i, "tag": tag})
    ids = [c.id for c in cells]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"cell {dup} appears twice; remove the repeated axis value")
    return cells


def variant_of(cell: dict) -> str | None:
    """A planned cell's variant (plans written before the axis was renamed say `era`)."""
    return cell.get("variant", cell.get("era"))


def _scenario_system(name: str) -> tuple[str, list[str]]:
    """(its system, its own variants): a scenario with `variants:` (Kafka's `unclean-on` /
    `unclean-off`) runs in each of them (those the campaign lists, if it lists any), the
    others in the campaign's variants of its system."""
    from scenarios.script import load_scenario
    scenario = load_scenario(name)
    return scenario.system, list(scenario.variants)


def _cell(campaign, cid, kind, system, variant, nemesis, workload, scenario, backend, profile=None) -> Cell:
    axes = {"system": system, "variant": variant, "nemesis": nemesis, "workload": workload, "scenario": scenario,
            "backend": backend, "profile": profile}
    rule = matching_rule(campaign, axes)
    verdict, why = (rule.verdict, rule.why) if rule else ("scenario" if kind == "scenario" else "valid", "")
    if verdict == "scenario":
        verdict, why = _scenario_expectation(scenario, variant)
    return Cell(cid, kind, system, variant, list(nemesis), workload, scenario, backend, verdict, why,
                checkers=list(rule.checkers) if rule and rule.checkers else None, profile=profile)


def _scenario_expectation(name: str, variant: str) -> tuple[str, str]:
    """("scenario", what the library declares) for an asserted variant, else ("any", "")."""
    from scenarios.script import load_scenario
    declared = load_scenario(name).expect.get(variant)
    if declared is None:
        return "any", ""
    if declared.valid is True:
        return "scenario", "the library declares valid"
    return "scenario", "the library declares " + (", ".join(declared.anomalies) or "invalid")

"""The campaign file: the axes of the matrix, the runs per cell, what each
cell is expected to show, and the budget. Validated with pydantic; any
mistake is one line that names the field, before any run starts."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness import registry
from harness.spec import SpecError, TestSpec, load_spec_file

AXES = ("system", "variant", "nemesis", "workload", "scenario", "backend", "profile")
ALIASES = {"era": "variant"}  # the axis's first name (the replica's generations), still accepted
# `harness run` fields a campaign sets itself (axes, seeds, where the store goes)
OWN_FIELDS = {"variant", "era", "system", "nemesis", "seed", "backend", "subnet", "store_root", "name", "time_limit",
              "nemesis_interval", "settings", "check", "backend_options"}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class CampaignError(ValueError):
    """A campaign that cannot run; the message is one line naming the problem and the fix."""


def parse_duration(text: str | float | int) -> float:
    """'2h', '90m', '45s', '3600' -> seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text <= 0:
            raise ValueError(f"{text!r} is not a positive duration")
        return float(text)
    m = DURATION.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration such as 2h, 90m or 600s")
    return float(m.group(1)) * UNITS[m.group(2)]


def known(kind: str) -> list[str]:
    """Registered names (harness.registry); `variant`: every system's variants."""
    if kind == "variant":
        return sorted({v for s in registry.load_all(registry.SYSTEMS).values() for v in s.variants})
    group = {"system": registry.SYSTEMS, "workload": registry.WORKLOADS, "fault": registry.FAULTS,
             "backend": registry.BACKENDS}[kind]
    return registry.names(group)


class ExpectRule(BaseModel):
    """Cells matching `where` are expected to be `verdict` (first matching rule wins)."""
    model_config = ConfigDict(extra="forbid")

    where: dict[str, Any] = Field(default_factory=dict)
    verdict: Literal["valid", "invalid", "any"]
    why: str = ""
    checkers: list[str] | None = Field(None, min_length=1, description="judge runs on these checkers only "
                                       "(e.g. [log] for a system without replica dumps)")

    @field_validator("where")
    @classmethod
    def _axes(cls, v):
        v = {ALIASES.get(k, k): x for k, x in v.items()}
        for k in v:
            if k not in AXES:
                raise ValueError(f"unknown axis {k!r}; use {', '.join(AXES)}")
        if "nemesis" in v:
            v["nemesis"] = nemesis_set(v["nemesis"])
        return v


def nemesis_set(v) -> list[str]:
    """'kill,partition', ['kill', 'partition'], 'none', [] -> a sorted list of fault names."""
    if v is None:
        return []
    if isinstance(v, str):
        v = [x.strip() for x in v.split(",")]
    if not isinstance(v, list):
        raise ValueError("a nemesis set is a list of fault names or a comma string such as kill,partition")
    names = sorted({str(x).strip() for x in v if str(x).strip() not in ("", "none")})
    faults = known("fault")
    for name in names:
        if name not in faults:
            raise ValueError(f"unknown fault {name!r} (known: {', '.join(faults)})")
    return names


class CampaignFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    systems: list[str] = Field(default_factory=lambda: [registry.DEFAULT_SYSTEM], min_length=1)
    # the variants axis (alias `eras:`); a system runs those of its own variants listed here,
    # or its default variant when none is
    variants: list[Annotated[str, AfterValidator(lambda v: _known_name(v, "variant"))]] = Field(
        default_factory=lambda: _default_variants(), min_length=1,
        validation_alias=AliasChoices("variants", "eras"))
    # the random runs' fault sets; `[]`: no random runs (a campaign of scenarios only)
    nemesis: list[list[str]] = Field(default_factory=lambda: [[]])
    workloads: list[str] = Field(default_factory=lambda: ["log"])
    scenarios: list[str] = Field(default_factory=list)
    backends: list[Annotated[str, AfterValidator(lambda v: _known_name(v, "backend"))]] = Field(
        default_factory=lambda: ["netns"], min_length=1)
    seeds: list[int] | None = Field(None, min_length=1)
    runs: int = Field(1, ge=1, le=10000, description="runs per cell when no seeds are listed")
    time_limit: float = Field(60.0, gt=0)
    nemesis_interval: float | None = Field(None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict, description="further `harness run` fields")
    # an axis of named sets of run fields over `options` (system_options and workload_options
    # merged key by key): what no other axis varies, e.g. a client crossed with a protocol and
    # the nemesis mode; random runs only. A profile's `variants: [..]` limits it to those variants.
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict, description="replica settings (Kafka names)")
    backend_options: dict[str, Any] = Field(default_factory=dict)
    expect: list[ExpectRule] = Field(default_factory=list)
    budget: str | float | None = None
    subnets: str = Field("10.240.0.0/16", description="parallel netns runs take /24s of this")

    @model_validator(mode="before")
    @classmethod
    def _alias_eras(cls, data):
        """`eras:` is the variants axis under its first name."""
        if isinstance(data, dict) and "eras" in data and "variants" in data:
            raise ValueError("give `variants` or its alias `eras`, not both")
        return data

    @model_validator(mode="after")
    def _some_runs(self):
        if not self.nemesis and not self.scenarios:
            raise ValueError("`nemesis: []` runs no random runs, and there are no `scenarios`: "
                             "give fault sets (e.g. [[kill]]) or scenarios")
        return self

    @field_validator("nemesis", mode="before")
    @classmethod
    def _sets(cls, v):
        if isinstance(v, (str, type(None))):
            v = [v]
        if not isinstance(v, list):
            raise ValueError("a list of nemesis sets, e.g. [[kill], [kill, partition], none]")
        return [nemesis_set(s) for s in v]

    @field_validator("systems")
    @classmethod
    def _systems(cls, v):
        return _known_names(v, "system")

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v):
        return _known_names(v, "workload")



    @field_validator("scenarios")
    @classmethod
    def _scenarios(cls, v):
        from scenarios.script import ScenarioError, load_scenario
        for name in v:
            try:
                load_scenario(name)
            except ScenarioError as e:
                raise ValueError(str(e).splitlines()[0]) from None
        return v

    @field_validator("options")
    @classmethod
    def _options(cls, v):
        fields = set(TestSpec.model_fields)
        for k in v:
            key = k.replace("-", "_")
            if key in OWN_FIELDS:
                raise ValueError(f"{k!r} is set by the campaign itself; use the campaign field instead")
            if key not in fields:
                raise ValueError(f"unknown run option {k!r} (known: {', '.join(sorted(fields - OWN_FIELDS))})")
        return {k.replace("-", "_"): x for k, x in v.items()}

    @field_validator("profiles")
    @classmethod
    def _profiles(cls, v):
        for name, fields in v.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
                raise ValueError(f"profile name {name!r}: letters, digits, '.', '_' and '-' only (it is part of "
                                 f"the cell's id)")
            if not isinstance(fields, dict):
                raise ValueError(f"profile {name!r}: a map of `harness run` fields, e.g. {{nemesis_mode: targeted}}")
            only = fields.get("variants", [])
            if not isinstance(only, list) or not all(isinstance(x, str) for x in only):
                raise ValueError(f"profile {name!r}: `variants` is a list of variant names")
            try:
                cls._options({k: x for k, x in fields.items() if k != "variants"})
            except ValueError as e:
                raise ValueError(f"profile {name!r}: {e}") from None
        return {name: {k.replace("-", "_"): x for k, x in fields.items()} for name, fields in v.items()}

    @field_validator("budget")
    @classmethod
    def _budget(cls, v):
        if v is not None:
            parse_duration(v)
        return v

    @field_validator("subnets")
    @classmethod
    def _subnets(cls, v):
        import ipaddress
        try:
            net = ipaddress.ip_network(v, strict=False)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 network such as 10.240.0.0/16") from None
        if net.prefixlen > 24:
            raise ValueError(f"{v!r} is smaller than a /24; give a /16 to /24 network")
        return v


def _default_variants() -> list[str]:
    """The default system's default variant (its variant option's default), if it has variants."""
    system = registry.system()
    if system.variant_option is None:
        return []
    return [system.options.model_fields[system.variant_option].default]


def profile_fields(campaign: "CampaignFile", profile: str | None) -> dict:
    """The run fields of a cell: the campaign's options with its profile's over them
    (system_options and workload_options merged key by key)."""
    fields = dict(campaign.options)
    for k, v in (campaign.profiles.get(profile) or {}).items() if profile else ():
        if k == "variants":   # where the profile runs, not a run field
            continue
        if k in ("system_options", "workload_options") and isinstance(v, dict):
            fields[k] = {**(fields.get(k) or {}), **v}
        else:
            fields[k] = v
    return fields


def profile_runs_in(campaign: "CampaignFile", profile: str | None, variant: str | None) -> bool:
    """Whether a profile is crossed with this variant (its `variants`, if it names some)."""
    only = (campaign.profiles.get(profile) or {}).get("variants") if profile else None
    return not only or variant in only


def system_variants(campaign: "CampaignFile", system) -> list[str | None]:
    """The variants a system runs in: those of the campaign's it has, else [None] (its default)."""
    own = [v for v in campaign.variants if v in system.variants]
    return own or [None]


def _known_name(name: str, kind: str) -> str:
    """One registered name (a list item keeps its index in the error's field)."""
    names = known(kind)
    if name not in names:
        raise ValueError(f"{name!r} is not one of {', '.join(names)}")
    return name


def _known_names(v: list[str], kind: str) -> list[str]:
    names = known(kind)
    for name in v:
        if name not in names:
            raise ValueError(f"unknown {kind} {name!r} (known: {', '.join(names)})")
    return v


def one_line(e: ValidationError) -> str:
    """The first error as `field 'a.b': what is wrong`."""
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "literal_error":
        msg = f"got {err.get('input')!r}; {msg.lower()}"
    elif err["type"] == "extra_forbidden":
        msg = f"unknown field (known: {', '.join(CampaignFile.model_fields)})" if len(err["loc"]) == 1 \
            else "unknown field"
    more = f" (and {len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return f"field '{loc}': {msg}{more}"


def load_campaign(path: str | Path) -> CampaignFile:
    """Read and validate a campaign file; CampaignError (one line) on any problem."""
    p = Path(path)
    try:
        data = load_spec_file(str(path), "campaign file")
    except SpecError as e:
        raise CampaignError(str(e)) from None
    data.setdefault("name", p.stem)
    try:
        campaign = CampaignFile.model_validate(data)
    except ValidationError as e:
        raise CampaignError(f"campaign file {path}: {one_line(e)}") from None
    if not campaign.workloads and not campaign.scenarios:
        raise CampaignError(f"campaign file {path}: field 'workloads': empty and no scenarios either; "
                            f"name at least one workload or scenario")
    return campaign

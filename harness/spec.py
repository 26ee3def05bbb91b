"""The test spec: CLI flags and/or a YAML file, validated with pydantic. The
resolved spec (every default filled in, the seed chosen) goes to test.json.

The spec names the system under test (`system`, harness/registry.py; the
registry's default when left out) and carries its options (`system_options`,
validated by the system's own model). `variant: X` at the top level is short
for `system_options: {<the system's variant_option>: X}`; `era: X` is the same
(the name the replica's generations had first)."""
from __future__ import annotations

import ipaddress
import random
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.registry import DEFAULT_SYSTEM


class SpecError(ValueError):
    """Bad spec input; the message is one line naming the problem and the fix."""


class TestSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="test name (store/<name>/...); default <workload>-<variant>")
    system: str = Field(DEFAULT_SYSTEM, description="the system under test (harness/registry.py)")
    system_options: dict[str, Any] = Field(default_factory=dict, description="the system's options (its own model)")
    workload: str = Field("log", description="the workload (replog.workloads)")
    workload_options: dict[str, Any] = Field(default_factory=dict,
                                             description="the workload's options (its own model; e.g. queue: txn)")
    backend: str = Field("netns", description="cluster backend (replog.backends): netns, docker, ssh")
    nodes: int = Field(3, ge=1, le=5, description="data nodes n1..nN")
    subnet: str = "10.210.0.0/24"
    time_limit: float = Field(60.0, gt=0, description="seconds of workload (before the final phase)")
    seed: int | None = None
    nemesis: list[str] = Field(default_factory=list, description="faults (replog.faults)")
    nemesis_interval: float = Field(10.0, gt=0, description="seconds between fault start and stop")
    nemesis_mode: Literal["random", "targeted"] = Field(
        "random", description="random: targets drawn blindly; targeted: targets and moments drawn from the "
                              "state the system's inspector shows (nemesis/targeted.py)")
    keys: int = Field(3, ge=1, le=64, description="partitions of the topic = history keys")
    concurrency: int = Field(10, ge=1, le=200, description="client processes")
    rate: float = Field(100.0, gt=0, description="target ops/s over all clients")
    send_fraction: float = Field(0.5, ge=0, le=1)
    acks: Literal["0", "1", "all"] = "all"
    replication_factor: int | None = Field(None, ge=1, le=5)
    settings: dict[str, Any] = Field(default_factory=dict, description="the system's settings (its own names)")
    recovery_timeout: float = Field(60.0, gt=0, description="final phase: wait for leaders and full ISRs")
    request_timeout: float = Field(5.0, gt=0, le=120, description="seconds a client waits for one answer "
                                   "(a send's acknowledgement, a poll, a metadata call) before it ends info")
    store_root: str = "store"
    check: bool = True
    backend_options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _variant_shorthand(cls, data):
        """`variant: X` (or its alias `era: X`) is short for `system_options: {<variant_option>: X}`."""
        if not isinstance(data, dict) or not ({"variant", "era"} & set(data)):
            return data
        data = dict(data)
        given = {k: data.pop(k) for k in ("variant", "era") if k in data}
        values = {v for v in given.values() if v is not None}
        if len(values) > 1:
            raise ValueError(f"variant {given.get('variant')!r} and era {given.get('era')!r} differ; give one")
        if not values:
            return data
        from harness import registry

        try:
            system = registry.system(data.get("system"))
        except registry.RegistryError:
            return data  # the `system` field says what is wrong
        if system.variant_option is None:
            raise ValueError(f"system {system.name!r} has no variants; leave out variant/era")
        data["system_options"] = {**(data.get("system_options") or {}), system.variant_option: values.pop()}
        return data

    @field_validator("nemesis", mode="before")
    @classmethod
    def _split_nemesis(cls, v):
        if isinstance(v, str):
            v = [x.strip() for x in v.split(",") if x.strip() and x.strip() != "none"]
        return v

    @field_validator("system", "backend", "workload", "nemesis")
    @classmethod
    def _registered_names(cls, v, info):
        """Names of registered parts (harness/registry.py); the field names the kind."""
        kind = "fault" if info.field_name == "nemesis" else info.field_name
        return [_registered(kind, name) for name in v] if isinstance(v, list) else _registered(kind, v)

    @field_validator("acks", mode="before")
    @classmethod
    def _acks_str(cls, v):
        return str(v) if isinstance(v, int) else v

    @field_validator("subnet")
    @classmethod
    def _subnet(cls, v):
        try:
            ipaddress.ip_network(v, strict=False)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 network such as 10.210.0.0/24") from None
        return v

    @model_validator(mode="after")
    def _resolve(self):
        from harness import registry

        system = registry.system(self.system)
        try:
            self.system_options = system.parse_options(self.system_options).model_dump()
        except ValidationError as e:
            raise ValueError(f"system_options: {_one_line(e)}") from None
        workload = registry.workload(self.workload)
        try:
            parsed = workload.parse_options(self.workload_options)
        except ValidationError as e:
            raise ValueError(f"workload_options: {_one_line(e)}") from None
        except ValueError as e:
            raise ValueError(f"workload_options: {e}") from None
        self.workload_options = parsed.model_dump() if parsed is not None else {}
        capabilities = system.capabilities_in(self.settings, self.system_options)
        for need in sorted(getattr(workload, "needs", ())):
            try:
                capabilities.require(need, f"--workload {self.workload}")
            except RuntimeError as e:
                raise ValueError(f"workload: {e}") from None
        for name in self.nemesis:
            try:
                capabilities.require_fault(registry.fault(name))
            except RuntimeError as e:
                raise ValueError(f"nemesis: {e}") from None
        if self.name is None:
            self.name = f"{self.workload}-{self.variant or self.system}"
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(1, 2**31)
        if self.replication_factor is None:
            self.replication_factor = min(3, self.nodes)
        if self.replication_factor > self.nodes:
            raise ValueError(f"replication_factor {self.replication_factor} > nodes {self.nodes}")
        for k, v in system.default_settings(self.replication_factor).items():
            self.settings.setdefault(k, v)
        return self

    @property
    def variant(self) -> str | None:
        """The system's variant option (the replica's era), if it has one."""
        from harness import registry

        opt = registry.system(self.system).variant_option
        return None if opt is None else self.system_options.get(opt)

    def system_def(self):
        from harness import registry

        return registry.system(self.system)

    def options(self):
        return self.system_def().parse_options(self.system_options)

    def capabilities(self):
        """The system's capabilities with this spec's settings and options (harness.sut.Capabilities)."""
        return self.system_def().capabilities_in(self.settings, self.options())


def _registered(kind: str, name: str) -> str:
    from harness import registry

    try:
        registry.load({"system": registry.SYSTEMS, "backend": registry.BACKENDS, "workload": registry.WORKLOADS,
                       "fault": registry.FAULTS}[kind], name)
    except registry.RegistryError as e:
        raise ValueError(str(e).split("; a new one")[0]) from None
    return name


def _one_line(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"]) or "spec"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "literal_error":
        msg = f"got {err.get('input')!r}; {msg.lower()}"
    elif err["type"] == "extra_forbidden":
        msg = "unknown field; see `harness run --help` for the fields"
    more = f" (and {len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return f"{loc}: {msg}{more}"


def load_spec_file(path: str, what: str = "spec file") -> dict:
    """A YAML mapping with dashes in keys made underscores; SpecError (one line) naming `what`."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as e:
        raise SpecError(f"{what} {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise SpecError(f"{what} {path}:{where}: malformed YAML ({getattr(e, 'problem', e)}); fix the syntax") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{what} {path}: must be a mapping of field: value, got {type(data).__name__}")
    return {k.replace("-", "_") if isinstance(k, str) else k: v for k, v in data.items()}


def build_spec(spec_file: str | None = None, **overrides) -> TestSpec:
    """File values, then CLI overrides (None means not given)."""
    data = load_spec_file(spec_file) if spec_file else {}
    given = {k: v for k, v in overrides.items() if v is not None}
    if {"variant", "era"} & set(given):  # a flag's variant replaces the file's (under either name)
        data.pop("variant", None)
        data.pop("era", None)
    for merged in ("system_options", "workload_options"):  # --option / --workload-option add to the file's
        if merged in given:
            given[merged] = {**(data.get(merged) or {}), **given[merged]}
    data.update(given)
    try:
        return TestSpec.model_validate(data)
    except ValidationError as e:
        src = f"spec file {spec_file}: " if spec_file else ""
        raise SpecError(src + _one_line(e)) from None


def parse_settings(pairs: list[str], flag: str = "--set") -> dict[str, Any]:
    """--set / --option key=value (values parsed as YAML scalars: 5000 -> int, true -> bool)."""
    out = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k.strip():
            raise SpecError(f"{flag} {p!r}: expected key=value, e.g. {flag} name=value")
        out[k.strip()] = yaml.safe_load(v) if v else ""
    return out


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """--option key=value: system options (e.g. nats version=2.12.1, sync_interval=always);
    values are YAML scalars, except that a version stays text."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise SpecError(f"--option {p!r}: expected key=value, e.g. --option version=2.12.1")
        k, v = p.split("=", 1)
        k = k.strip()
        out[k] = v if k == "version" else (yaml.safe_load(v) if v else "")
    return out

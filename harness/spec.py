"""The test spec: CLI flags and/or a YAML file, validated with pydantic. The
resolved spec (every default filled in, the seed chosen) goes to test.json."""
from __future__ import annotations

import ipaddress
import random
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ERAS = ("hw", "kip101", "epoch")
FAULTS = ("kill", "pause", "partition")
BACKENDS = ("netns", "docker", "ssh")


class SpecError(ValueError):
    """Bad spec input; the message is one line naming the problem and the fix."""


class TestSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="test name (store/<name>/...); default log-<era>")
    era: Literal["hw", "kip101", "epoch"] = "epoch"
    backend: Literal["netns", "docker", "ssh"] = "netns"
    nodes: int = Field(3, ge=1, le=5, description="broker hosts n1..nN")
    subnet: str = "10.210.0.0/24"
    time_limit: float = Field(60.0, gt=0, description="seconds of workload (before the final phase)")
    seed: int | None = None
    nemesis: list[Literal["kill", "pause", "partition"]] = Field(default_factory=list)
    nemesis_interval: float = Field(10.0, gt=0, description="seconds between fault start and stop")
    keys: int = Field(3, ge=1, le=64, description="partitions of the topic = history keys")
    concurrency: int = Field(10, ge=1, le=200, description="client processes")
    rate: float = Field(100.0, gt=0, description="target ops/s over all clients")
    send_fraction: float = Field(0.5, ge=0, le=1)
    acks: Literal["0", "1", "all"] = "all"
    replication_factor: int | None = Field(None, ge=1, le=5)
    settings: dict[str, Any] = Field(default_factory=dict, description="replica settings (Kafka names)")
    recovery_timeout: float = Field(60.0, gt=0, description="final phase: wait for leaders and full ISRs")
    store_root: str = "store"
    check: bool = True
    backend_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("nemesis", mode="before")
    @classmethod
    def _split_nemesis(cls, v):
        if isinstance(v, str):
            v = [x.strip() for x in v.split(",") if x.strip() and x.strip() != "none"]
        return v

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
        if self.name is None:
            self.name = f"log-{self.era}"
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(1, 2**31)
        if self.replication_factor is None:
            self.replication_factor = min(3, self.nodes)
        if self.replication_factor > self.nodes:
            raise ValueError(f"replication_factor {self.replication_factor} > nodes {self.nodes}")
        self.settings.setdefault("min.insync.replicas", min(2, self.replication_factor))
        return self


def _one_line(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"]) or "spec"
    msg = err["msg"]
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
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return TestSpec.model_validate(data)
    except ValidationError as e:
        src = f"spec file {spec_file}: " if spec_file else ""
        raise SpecError(src + _one_line(e)) from None


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """--set key=value (values parsed as YAML scalars: 5000 -> int, true -> bool)."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise SpecError(f"--set {p!r}: expected key=value, e.g. --set replica.lag.time.max.ms=10000")
        k, v = p.split("=", 1)
        out[k.strip()] = yaml.safe_load(v) if v else ""
    return out

"""The scenario script format (YAML), validated with pydantic.

A script is a mapping of cluster settings, per-era expectations and a list of
steps. Each step is a mapping with exactly one action key (`write`, `kill`,
`restart`, `pause`, `resume`, `partition`, `heal`, `wait`, `sleep`, `bind`)
plus optional `id` (a label that later `measure.since` can name) and `as`
(a name bound to the node the step acted on). Every problem is reported as one
line that names the step, e.g. ``step 4 (kill): unknown node 'n9' ...``; see
nemesis/scenarios/README.md for the whole format.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nemesis.scenarios import conditions, roles

ERAS = ("hw", "kip101", "epoch")
LOG_ANOMALIES = ("lost-write", "unseen", "inconsistent-offsets", "duplicate", "nonmonotonic-poll",
                 "poll-skip", "nonmonotonic-send", "aborted-read", "realtime-order")
DIFF_ANOMALIES = ("divergence", "missing-committed", "lost-acknowledged")
ANOMALIES = LOG_ANOMALIES + DIFF_ANOMALIES
NODE_ACTIONS = ("kill", "restart", "pause", "resume")
ACTIONS = ("write", *NODE_ACTIONS, "partition", "heal", "wait", "sleep", "bind")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ScenarioError(ValueError):
    """A bad script; the message is one line naming the step and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------- steps
class WriteArgs(_Strict):
    key: int = Field(0, ge=0)
    count: int = Field(1, ge=1, le=10000)
    acks: Literal["0", "1", "all"] | None = None  # None: the scenario's acks
    expect: Literal["ok", "any"] = "ok"  # "ok": a send that is not acknowledged fails the step

    @field_validator("acks", mode="before")
    @classmethod
    def _acks_str(cls, v):
        return str(v) if isinstance(v, int) else v


class PartitionArgs(_Strict):
    """Grudges, all applied together (added to the rules already in place)."""

    grudge: dict[str, list[str]] = Field(default_factory=dict)  # node -> nodes whose packets it drops
    cut: list[list[str]] = Field(default_factory=list)  # [X, Y]: no packets either way
    one_way: list[dict[str, str]] = Field(default_factory=list, alias="one-way")  # {from: X, to: Y}
    isolate: list[str] = Field(default_factory=list)  # X hears nobody, nobody hears X

    @field_validator("cut", mode="before")
    @classmethod
    def _one_pair(cls, v):
        return [v] if isinstance(v, list) and v and all(isinstance(x, str) for x in v) else v

    @field_validator("one_way", mode="before")
    @classmethod
    def _one_dict(cls, v):
        return [v] if isinstance(v, dict) else v

    @field_validator("isolate", mode="before")
    @classmethod
    def _one_node(cls, v):
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self):
        for pair in self.cut:
            if len(pair) != 2:
                raise ValueError(f"cut takes pairs [X, Y], got {pair}")
        for ow in self.one_way:
            if set(ow) != {"from", "to"}:
                raise ValueError(f"one-way takes {{from: X, to: Y}}, got {ow}")
        if not (self.grudge or self.cut or self.one_way or self.isolate):
            raise ValueError("empty partition: give grudge, cut, one-way or isolate")
        return self

    def node_refs(self) -> list[str]:
        refs = [n for k, v in self.grudge.items() for n in (k, *v)]
        refs += [n for pair in self.cut for n in pair]
        refs += [n for ow in self.one_way for n in ow.values()]
        return refs + list(self.isolate)


class Measure(_Strict):
    """Time from an earlier step (by id) until the condition held; optional bound."""

    name: str
    since: str
    max_ms: str | float | None = None  # a number or "FACTOR * setting.name"
    # take the time from the brokers' log line of this event (exact) rather than from polling
    event: Literal["isr-shrink", "isr-expand"] | None = None


class WaitArgs(_Strict):
    until: str
    timeout: float = Field(30.0, gt=0, le=600)
    measure: Measure | None = None


class Step(_Strict):
    """One parsed step: `action` and its validated `args`."""

    index: int  # 1-based, as in error messages
    action: str
    args: Any = None
    id: str | None = None
    bind_as: str | None = None
    parsed: Any = None  # the parsed condition of a wait step
    eras: list[str] | None = None  # run only in these eras (protocol generations differ)

    def label(self) -> str:
        return f"step {self.index} ({self.action}{' ' + self.id if self.id else ''})"


def known_anomalies(names: list[str]) -> list[str]:
    """Validator: every name must be an anomaly type some checker reports."""
    for a in names:
        if a not in ANOMALIES:
            raise ValueError(f"unknown anomaly {a!r} (known: {', '.join(ANOMALIES)})")
    return names


class Expectation(_Strict):
    valid: bool | Literal["unknown"]
    anomalies: list[str] = Field(default_factory=list)  # must all be found (forbidden ones)

    @field_validator("anomalies")
    @classmethod
    def _known(cls, v):
        return known_anomalies(v)


class Truncation(_Strict):
    node: str
    to: int = Field(ge=0)
    key: int = 0


class Scenario(_Strict):
    name: str
    description: str = ""
    source: str = ""
    nodes: int = Field(3, ge=1, le=5)
    keys: int = Field(1, ge=1, le=16)
    replication_factor: int | None = Field(None, ge=1, le=5)
    acks: Literal["0", "1", "all"] = "all"
    settings: dict[str, Any] = Field(default_factory=dict)
    allowed_anomalies: list[str] = Field(default_factory=list)
    expect: dict[Literal["hw", "kip101", "epoch"], Expectation] = Field(default_factory=dict)
    truncations: dict[Literal["hw", "kip101", "epoch"], list[Truncation]] = Field(default_factory=dict)
    recovery_timeout: float = Field(30.0, gt=0, le=300)
    steps: list[Step]
    path: str | None = None

    @field_validator("acks", mode="before")
    @classmethod
    def _acks_str(cls, v):
        return str(v) if isinstance(v, int) else v

    @field_validator("expect", mode="before")
    @classmethod
    def _short_expect(cls, v):
        """`epoch: valid` is short for {valid: true}; `hw: lost-write` for {valid: false, anomalies: [...]}."""
        if not isinstance(v, dict):
            return v
        out = {}
        for era, e in v.items():
            if e == "valid":
                e = {"valid": True}
            elif e == "unknown":
                e = {"valid": "unknown"}
            elif isinstance(e, str):
                e = {"valid": False, "anomalies": [a.strip() for a in e.split(",")]}
            elif isinstance(e, list):
                e = {"valid": False, "anomalies": e}
            out[era] = e
        return out

    @field_validator("allowed_anomalies")
    @classmethod
    def _known(cls, v):
        return known_anomalies(v)

    @model_validator(mode="after")
    def _resolve(self):
        if self.replication_factor is None:
            self.replication_factor = min(3, self.nodes)
        if self.replication_factor > self.nodes:
            raise ValueError(f"replication_factor {self.replication_factor} > nodes {self.nodes}")
        return self

    def allowed(self, era: str) -> list[str]:
        """Anomaly types this configuration may legitimately show; divergence
        is never allowed in era epoch."""
        return [a for a in self.allowed_anomalies if not (era == "epoch" and a == "divergence")]

    def step_ids(self) -> dict[str, Step]:
        return {s.id: s for s in self.steps if s.id}


# --------------------------------------------------------------------- parsing
def _one_line(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    elif err["type"] == "literal_error":
        msg = f"got {err.get('input')!r}; {msg.lower()}"
    msg = msg.removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def _parse_step(index: int, raw: Any) -> Step:
    where = f"step {index}"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: must be a mapping such as {{kill: n1}}, got {raw!r}")
    extra = {k: raw[k] for k in ("id", "as") if k in raw}
    eras = raw.get("eras")
    if eras is not None:
        eras = [eras] if isinstance(eras, str) else eras
        if not isinstance(eras, list) or not eras or any(e not in ERAS for e in eras):
            raise ScenarioError(f"{where}: eras must list some of {', '.join(ERAS)}, got {raw['eras']!r}")
    actions = [k for k in raw if k not in ("id", "as", "eras")]
    known = [k for k in actions if k in ACTIONS]
    unknown = [k for k in actions if k not in ACTIONS]
    if unknown:
        raise ScenarioError(f"{where}: unknown step {unknown[0]!r} (known: {', '.join(ACTIONS)})")
    if len(known) != 1:
        raise ScenarioError(f"{where}: needs exactly one action of {', '.join(ACTIONS)}, got {actions or 'none'}")
    action = known[0]
    where = f"step {index} ({action})"
    value = raw[action]
    for name in extra.values():
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ScenarioError(f"{where}: id/as must be a plain name such as A or cut, got {name!r}")
    try:
        if action == "write":
            args = WriteArgs.model_validate({"count": value} if isinstance(value, int) else (value or {}))
        elif action == "partition":
            args = PartitionArgs.model_validate(value)
        elif action == "wait":
            args = WaitArgs.model_validate({"until": value} if isinstance(value, str) else value)
        elif action in NODE_ACTIONS:
            refs = [value] if isinstance(value, str) else value
            if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
                raise ScenarioError(f"{where}: takes a node or a list of nodes, e.g. {action}: leader of key 0")
            args = refs
        elif action == "heal":
            if value not in (None, {}, True, "all"):
                raise ScenarioError(f"{where}: takes no arguments (write `- heal:`)")
            args = None
        elif action == "sleep":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 60:
                raise ScenarioError(f"{where}: takes seconds between 0 and 60, got {value!r}")
            args = float(value)
        else:  # bind
            if not isinstance(value, dict) or not value or not all(
                    isinstance(k, str) and NAME_RE.match(k) and isinstance(v, str) for k, v in value.items()):
                raise ScenarioError(f"{where}: takes names and nodes, e.g. bind: {{A: a follower of key 0}}")
            args = dict(value)
    except ValidationError as e:
        raise ScenarioError(f"{where}: {_one_line(e)}") from None
    if "as" in extra and action not in NODE_ACTIONS:
        raise ScenarioError(f"{where}: `as` names the node of a kill/restart/pause/resume step")
    return Step(index=index, action=action, args=args, id=extra.get("id"), bind_as=extra.get("as"), eras=eras)


def parse(data: Any, source: str = "scenario") -> Scenario:
    """A validated Scenario from the loaded YAML, or ScenarioError (one line)."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: must be a mapping with name, settings and steps")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError(f"{source}: needs a non-empty list `steps:`")
    steps = [_parse_step(i, raw) for i, raw in enumerate(raw_steps, start=1)]
    fields = {k.replace("-", "_") if isinstance(k, str) else k: v for k, v in data.items() if k != "steps"}
    try:
        scenario = Scenario.model_validate({**fields, "steps": [s.model_dump() for s in steps]})
    except ValidationError as e:
        raise ScenarioError(f"{source}: {_one_line(e)}") from None
    scenario.steps = steps
    _check_settings(scenario, source)
    _check_references(scenario)
    return scenario


def _check_settings(scenario: Scenario, source: str) -> None:
    from replica import config as rconfig  # the replica's own setting names and types

    for name, value in scenario.settings.items():
        try:
            rconfig.coerce(name, value)
        except rconfig.ConfigError as e:
            raise ScenarioError(f"{source}: settings: {e}") from None


def _check_references(scenario: Scenario) -> None:
    """Every node reference, alias, key and step id must make sense where it is used."""
    bound: set[str] = set()
    ids: set[str] = set()
    layout = roles.Layout(scenario.nodes, scenario.keys, scenario.replication_factor)
    for step in scenario.steps:
        where = step.label()

        def check(ref: str) -> None:
            try:
                roles.parse_ref(ref, layout, bound)
            except roles.RefError as e:
                raise ScenarioError(f"{where}: {e}") from None

        if step.action in NODE_ACTIONS:
            for ref in step.args:
                check(ref)
        elif step.action == "partition":
            for ref in step.args.node_refs():
                check(ref)
        elif step.action == "bind":
            for name, ref in step.args.items():
                check(ref)
            bound.update(step.args)
        elif step.action == "write":
            if step.args.key >= scenario.keys:
                raise ScenarioError(f"{where}: key {step.args.key} does not exist (keys: {scenario.keys})")
        elif step.action == "wait":
            try:
                step.parsed = conditions.parse(step.args.until, layout, bound)
            except conditions.ConditionError as e:
                raise ScenarioError(f"{where}: {e}") from None
            m = step.args.measure
            if m is not None:
                if m.since not in ids:
                    raise ScenarioError(f"{where}: measure.since {m.since!r} is not the id of an earlier step")
                try:
                    bound_ms(m.max_ms, scenario.settings, "epoch")
                except ValueError as e:
                    raise ScenarioError(f"{where}: measure.max_ms: {e}") from None
        if step.bind_as:
            if step.action in NODE_ACTIONS and len(step.args) != 1:
                raise ScenarioError(f"{where}: `as` needs exactly one node")
            bound.add(step.bind_as)
        if step.id:
            if step.id in ids:
                raise ScenarioError(f"{where}: id {step.id!r} is used twice")
            ids.add(step.id)


def bound_ms(spec: str | float | None, settings: dict, era: str) -> float | None:
    """`max_ms`: a number, or "FACTOR * setting" using the scenario's (or the default) setting."""
    if spec is None or isinstance(spec, (int, float)):
        return spec
    m = re.fullmatch(r"\s*([0-9.]+)\s*[*x]\s*([a-z.]+)\s*", spec)
    if not m:
        raise ValueError(f"{spec!r}: use a number or FACTOR * setting, e.g. 1.5 * replica.lag.time.max.ms")
    from replica import config as rconfig

    try:
        values = rconfig.build(era, settings)
    except rconfig.ConfigError as e:
        raise ValueError(str(e)) from None
    if m.group(2) not in values:
        raise ValueError(f"unknown setting {m.group(2)!r}")
    return float(m.group(1)) * float(values[m.group(2)])


# --------------------------------------------------------------------- loading
LIBRARY = Path(__file__).resolve().parent / "library"


def list_scenarios() -> list[str]:
    return sorted(p.stem for p in LIBRARY.glob("*.yaml"))


def load_file(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ScenarioError(f"scenario file {path}: {e.strerror}; pass a readable YAML file") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"scenario file {path}:{where}: malformed YAML "
                            f"({getattr(e, 'problem', None) or e}); fix the syntax") from None
    scenario = parse(data, source=f"scenario file {path}")
    scenario.path = str(p)
    return scenario


def load_scenario(name_or_path: str) -> Scenario:
    """A library scenario by name, or a script file by path."""
    if name_or_path in list_scenarios():
        return load_file(LIBRARY / f"{name_or_path}.yaml")
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        return load_file(name_or_path)
    raise ScenarioError(f"unknown scenario {name_or_path!r} (known: {', '.join(list_scenarios())}); "
                        f"see `harness scenario --list`, or pass --file FILE.yaml")


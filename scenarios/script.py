"""The scenario script format (YAML), validated with pydantic.

A script names its system under test (`system:`, default: the registry's
default system) and has cluster settings, per-variant expectations (the
variants are the system's `variants`), anomalies it allows (`allowed_anomalies`)
and, per variant, those it never allows even so (`forbidden_anomalies`), and a
list of steps. Each step is a mapping with exactly one action key plus optional
`id` (a label that later `measure.since` can name), `as` (a name bound to the
node the step acted on) and `variants` (the variants it runs in; `eras` is an
alias). Actions: `write`, `txn`, `wait`, `sleep`, `bind`, and every registered fault
the system supports, by its start step and its stop step (`kill`/`restart`,
`pause`/`resume`, `partition`/`heal`, ...; nemesis/fault.py). Every problem is
reported as one line that names the step, e.g. ``step 4 (kill): unknown node
'n9' ...``, before any host exists; see scenarios/README.md.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from checkers.vocabulary import ANOMALIES
from harness import registry
from harness.registry import DEFAULT_SYSTEM
from harness.sut import META_GROUP, TRANSACTIONS, Unsupported
from nemesis.fault import FaultArgError, NodesRequest
from scenarios import conditions, roles

OWN_ACTIONS = ("write", "txn", "wait", "sleep", "bind")
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
    parallel: bool = False   # all sends at once, one process each, not waited for (expect: any): a burst
    # the writer connects through this node (a node, a name bound with `as`, or "leader of key K");
    # later writes keep that connection while it lasts (see DB.client's `prefer`)
    via: str | None = None

    @model_validator(mode="after")
    def _parallel_expects_any(self):
        if self.parallel and self.expect != "any":
            raise ValueError("parallel writes are not waited for: use expect: any")
        if self.parallel and self.via is not None:
            raise ValueError("via is for the scenario's one writer, not for parallel writes")
        return self

    @field_validator("acks", mode="before")
    @classmethod
    def _acks_str(cls, v):
        return str(v) if isinstance(v, int) else v


class TxnArgs(_Strict):
    """One transaction of the scenario's transactional writer (the `queue` workload's `txn` op):
    begin, `count` sends to `key`, commit. `coordinator_not`: a node reference; the writer's
    transactional id is one whose transaction coordinator is another node (chosen at the
    writer's first transaction), so that a fault on that node does not reach the coordinator."""
    key: int = Field(0, ge=0)
    count: int = Field(1, ge=1, le=100)
    expect: Literal["ok", "any"] = "ok"  # "ok": a transaction that is not committed fails the step
    coordinator_not: str | None = None
    coordinator: str | None = None   # a node reference: the writer's coordinator is that node
    # s the application waits for each send's acknowledgement; without one it aborts the
    # transaction while the send is still in flight (an application bounding its own waits)
    abort_after: float | None = Field(None, gt=0, le=120)
    # started and not waited for: the next steps run while it is open (a fault in its middle);
    # the writer's next txn step, and the final phase, wait for it first
    background: bool = False

    @model_validator(mode="after")
    def _consistent(self):
        if self.coordinator is not None and self.coordinator_not is not None:
            raise ValueError("give coordinator or coordinator_not, not both")
        if self.background and self.expect != "any":
            raise ValueError("a background transaction is not waited for: use expect: any")
        return self


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
    variants: list[str] | None = None  # run only in these variants (script key `variants`, alias `eras`)
    fault: str | None = None  # a fault step: the registered fault's name
    stop: bool = False  # ... and whether the step stops it

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


class ScenarioVariant(_Strict):
    """A configuration the scenario is run in, named by the scenario itself
    (Kafka's `elr-on` / `elr-off`): system options and settings on top of the
    scenario's own. A scenario without `variants:` runs in the system's variants."""
    description: str = ""
    options: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)


class Scenario(_Strict):
    name: str
    system: str = DEFAULT_SYSTEM
    description: str = ""
    source: str = ""
    nodes: int = Field(3, ge=1, le=5)
    keys: int = Field(1, ge=1, le=16)
    replication_factor: int | None = Field(None, ge=1, le=5)
    acks: Literal["0", "1", "all"] = "all"
    settings: dict[str, Any] = Field(default_factory=dict)
    variants: dict[str, ScenarioVariant] = Field(default_factory=dict)  # its own variants (else the system's)
    system_options: dict[str, Any] = Field(default_factory=dict)  # pinned (e.g. nats version); the variant and --option win
    allowed_anomalies: list[str] = Field(default_factory=list)
    forbidden_anomalies: dict[str, list[str]] = Field(default_factory=dict)  # variant -> never allowed there
    expect: dict[str, Expectation] = Field(default_factory=dict)  # variant (era) -> expected verdict
    truncations: dict[str, list[Truncation]] = Field(default_factory=dict)
    recovery_timeout: float = Field(30.0, gt=0, le=300)
    # the writer's client: how long a send waits for its answer (a scenario whose answer comes
    # only after a heal needs more than the default's 5 s on a loaded machine)
    request_timeout: float = Field(5.0, gt=0, le=120)
    # the workload the run's clients are of: `log` (write steps) or `queue` (txn steps: transactions)
    workload: str = "log"
    workload_options: dict[str, Any] = Field(default_factory=dict)
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

    @field_validator("forbidden_anomalies")
    @classmethod
    def _known_forbidden(cls, v):
        return {variant: known_anomalies(names) for variant, names in v.items()}

    def allowed(self, variant: str | None) -> list[str]:
        """Anomaly types this configuration may legitimately show in a variant."""
        never = set(self.forbidden_anomalies.get(variant or "", ()))
        return [a for a in self.allowed_anomalies if a not in never]

    def system_def(self):
        return registry.system(self.system)

    def variant_names(self) -> tuple[str, ...]:
        """What `--variant` takes: the scenario's own variants, or the system's."""
        return tuple(self.variants) if self.variants else tuple(self.system_def().variants)

    def variant_options(self, variant: str | None) -> dict:
        """system_options of a run in that variant: the scenario's pinned ones, then the variant's."""
        if self.variants and variant in self.variants:
            return {**self.system_options, **self.variants[variant].options}
        return {**self.system_options, **self.system_def().variant_options(variant)}

    def variant_settings(self, variant: str | None) -> dict:
        """The scenario's settings with the variant's on top."""
        extra = self.variants[variant].settings if self.variants and variant in self.variants else {}
        return {**self.settings, **extra}

    def faults(self) -> list[str]:
        return sorted({s.fault for s in self.steps if s.fault})

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


def fault_actions() -> dict[str, tuple[str, bool]]:
    """Step name -> (fault, stops it) for every registered fault (whether the system supports it
    depends on a variant's settings and options: `_check_references_in` asks)."""
    out = {}
    for name in registry.names(registry.FAULTS):
        kind = registry.fault(name)
        out[kind.name] = (name, False)
        out[kind.stop_step_name] = (name, True)
    return out


def _parse_step(index: int, raw: Any, system, allowed: tuple[str, ...] | None = None) -> Step:
    """`allowed`: the variants a step may name (the scenario's own, else the system's)."""
    where = f"step {index}"
    allowed = tuple(system.variants) if allowed is None else allowed
    faults = fault_actions()
    actions_known = (*OWN_ACTIONS, *faults)
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: must be a mapping such as {{kill: n1}}, got {raw!r}")
    extra = {k: raw[k] for k in ("id", "as") if k in raw}
    keys = [k for k in ("variants", "eras") if k in raw]
    if len(keys) > 1:
        raise ScenarioError(f"{where}: give `variants` or its alias `eras`, not both")
    variants = raw[keys[0]] if keys else None
    if variants is not None:
        variants = [variants] if isinstance(variants, str) else variants
        if not isinstance(variants, list) or not variants or any(e not in allowed for e in variants):
            raise ScenarioError(f"{where}: {keys[0]} must list some of {', '.join(allowed) or '(none)'}, "
                                f"got {raw[keys[0]]!r}")
    actions = [k for k in raw if k not in ("id", "as", "variants", "eras")]
    known = [k for k in actions if k in actions_known]
    unknown = [k for k in actions if k not in actions_known]
    if unknown:
        raise ScenarioError(f"{where}: unknown step {unknown[0]!r} (known: {', '.join(actions_known)})")
    if len(known) != 1:
        raise ScenarioError(f"{where}: needs exactly one action of {', '.join(actions_known)}, "
                            f"got {actions or 'none'}")
    action = known[0]
    where = f"step {index} ({action})"
    value = raw[action]
    for name in extra.values():
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ScenarioError(f"{where}: id/as must be a plain name such as A or cut, got {name!r}")
    fault, stop = faults.get(action, (None, False))
    try:
        if fault is not None:
            args = registry.fault(fault).parse(value, stop)
        elif action == "write":
            args = WriteArgs.model_validate({"count": value} if isinstance(value, int) else (value or {}))
        elif action == "txn":
            args = TxnArgs.model_validate({"count": value} if isinstance(value, int) and not isinstance(value, bool)
                                          else {} if value is None else value)
        elif action == "wait":
            args = WaitArgs.model_validate({"until": value} if isinstance(value, str) else value)
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
    except FaultArgError as e:
        raise ScenarioError(f"{where}: {e}") from None
    if "as" in extra and not isinstance(args, NodesRequest):
        raise ScenarioError(f"{where}: `as` names the node of a step that acts on nodes (kill, restart, ...)")
    return Step(index=index, action=action, args=args, id=extra.get("id"), bind_as=extra.get("as"), variants=variants,
                fault=fault, stop=stop)


def parse(data: Any, source: str = "scenario") -> Scenario:
    """A validated Scenario from the loaded YAML, or ScenarioError (one line)."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: must be a mapping with name, settings and steps")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError(f"{source}: needs a non-empty list `steps:`")
    try:
        system = registry.system(data.get("system"))  # None: the default system
    except registry.RegistryError as e:
        raise ScenarioError(f"{source}: system: {e}") from None
    own = data.get("variants")
    variants = tuple(str(v) for v in own) if isinstance(own, dict) and own else tuple(system.variants)
    steps = [_parse_step(i, raw, system, variants) for i, raw in enumerate(raw_steps, start=1)]
    fields = {k.replace("-", "_") if isinstance(k, str) else k: v for k, v in data.items() if k != "steps"}
    try:
        scenario = Scenario.model_validate({**fields, "steps": [s.model_dump() for s in steps]})
    except ValidationError as e:
        raise ScenarioError(f"{source}: {_one_line(e)}") from None
    scenario.steps = steps
    for what, table in (("expect", scenario.expect), ("truncations", scenario.truncations),
                        ("forbidden_anomalies", scenario.forbidden_anomalies)):
        for variant in table:
            if variant not in variants:
                whose = f"scenario {scenario.name!r}" if scenario.variants else f"system {system.name!r}"
                raise ScenarioError(f"{source}: {what}: {variant!r} is not a variant of {whose} "
                                    f"(variants: {', '.join(variants) or 'none'})")
    _check_settings(scenario, system, source)
    _check_workload(scenario, source)
    _check_references(scenario, system)
    return scenario


def _check_workload(scenario: Scenario, source: str) -> None:
    try:
        workload = registry.workload(scenario.workload)
    except registry.RegistryError as e:
        raise ScenarioError(f"{source}: workload: {e}") from None
    try:
        workload.parse_options(scenario.workload_options)
    except ValidationError as e:
        raise ScenarioError(f"{source}: workload_options: {_one_line(e)}") from None
    except ValueError as e:
        raise ScenarioError(f"{source}: workload_options: {e}") from None


def _check_settings(scenario: Scenario, system, source: str) -> None:
    for name, variant in (scenario.variants or {None: None}).items():
        where = f"variants.{name}" if name else "settings"
        try:
            options = system.parse_options(scenario.variant_options(name) if name else {})
        except ValidationError as e:
            raise ScenarioError(f"{source}: {where}.options: {_one_line(e)}") from None
        if system.check_settings is None:
            continue
        try:
            system.check_settings(scenario.variant_settings(name), options)
        except ValueError as e:
            raise ScenarioError(f"{source}: {where}: {e}") from None


def layout(scenario: Scenario, system=None, variant: str | None = None) -> roles.Layout:
    """The hosts a run in `variant` has: a variant may change them (Kafka's ZooKeeper-era
    versions have the role host `zk` where 4.x has `ctl`)."""
    return _layout(scenario, system or scenario.system_def(), scenario.variant_options(variant),
                   scenario.variant_settings(variant))


def hosts_layout(scenario: Scenario, role_hosts: dict[str, str]) -> roles.Layout:
    """The script's view of a run whose role hosts are these (HostPlan.roles)."""
    return roles.Layout(scenario.nodes, scenario.keys, scenario.replication_factor, dict(role_hosts))


def _layout(scenario: Scenario, system, system_options: dict, settings: dict) -> roles.Layout:
    plan = system.host_plan(scenario.nodes, options=system.parse_options(system_options), settings=settings)
    return hosts_layout(scenario, plan.roles)


def checked_variants(scenario: Scenario) -> list[str | None]:
    """The variants a script's references must hold in: its own variants, else those it
    declares a verdict for, else the system's default (None)."""
    if scenario.variants:
        return list(scenario.variants)
    names = scenario.variant_names()
    return [v for v in scenario.expect if v in names] or [None]


def _check_references(scenario: Scenario, system) -> None:
    """Every node reference, alias, key, step id and capability must make sense where it is
    used, in every variant the scenario runs in (a host one variant lacks is named here, not
    dropped from a partition when the run reaches it)."""
    plans = {variant: layout(scenario, system, variant) for variant in checked_variants(scenario)}
    capabilities = {variant: system.capabilities_in(scenario.variant_settings(variant), scenario.variant_options(variant))
                    for variant in plans}
    distinct = {tuple(sorted(p.roles.items())) for p in plans.values()}
    differ = len(distinct) > 1 or len({c.available for c in capabilities.values()}) > 1
    for variant, plan in plans.items():
        _check_references_in(scenario, system, capabilities[variant], plan, variant if differ else None)


def check_run_hosts(scenario: Scenario, variant: str | None, system_options: dict, settings: dict) -> None:
    """Before any host exists: every reference names a host this run will have (an option
    such as Kafka's controllers=combined removes `ctl`); ScenarioError, one line."""
    system = scenario.system_def()
    _check_references_in(scenario, system, system.capabilities_in(settings, system_options),
                         _layout(scenario, system, system_options, settings), variant)


def _check_references_in(scenario: Scenario, system, capabilities, plan: roles.Layout, variant: str | None) -> None:
    bound: set[str] = set()
    ids: set[str] = set()
    for step in scenario.steps:
        if variant is not None and step.variants is not None and variant not in step.variants:
            continue
        where = step.label() + (f" in variant {variant}" if variant is not None else "")

        def check(ref: str) -> None:
            try:
                parsed = roles.parse_ref(ref, plan, bound)
            except roles.RefError as e:
                raise ScenarioError(f"{where}: {e}") from None
            if parsed.meta:
                capabilities.require(META_GROUP, f"{where}: `{ref}`")

        try:
            if step.fault is not None:
                for cap in registry.fault(step.fault).needs:
                    capabilities.require(cap, f"step {step.index} ({step.action})")
                for ref in (step.args.refs() if step.args is not None else []):
                    check(ref)
            elif step.action == "bind":
                for name, ref in step.args.items():
                    check(ref)
                bound.update(step.args)
            elif step.action in ("write", "txn"):
                if step.args.key >= scenario.keys:
                    raise ScenarioError(f"{where}: key {step.args.key} does not exist (keys: {scenario.keys})")
                if step.action == "write" and scenario.workload != "log":
                    raise ScenarioError(f"{where}: write steps are the log workload's; this scenario's workload "
                                        f"is {scenario.workload!r} (use txn steps, or leave `workload:` out)")
                if step.action == "txn":
                    if scenario.workload != "queue":
                        raise ScenarioError(f"{where}: txn steps need the queue workload's transactional "
                                            f"writer: add `workload: queue` to the scenario")
                    capabilities.require(TRANSACTIONS, where)
                    for ref in (step.args.coordinator_not, step.args.coordinator):
                        if ref is not None:
                            check(ref)
            elif step.action == "wait":
                try:
                    step.parsed = conditions.parse(step.args.until, plan, bound)
                except conditions.ConditionError as e:
                    raise ScenarioError(f"{where}: {e}") from None
                for cap in sorted(conditions.needs(step.parsed)):
                    capabilities.require(cap, f"{where}: `{step.parsed.text}`")
                m = step.args.measure
                if m is not None:
                    if m.event is not None:
                        capabilities.require("events", f"{where}: measure.event {m.event}")
                    if m.since not in ids:
                        raise ScenarioError(f"{where}: measure.since {m.since!r} is not the id of an earlier step")
                    try:
                        bound_ms(m.max_ms, scenario.settings, None, system)
                    except ValueError as e:
                        raise ScenarioError(f"{where}: measure.max_ms: {e}") from None
        except Unsupported as e:
            raise ScenarioError(str(e)) from None
        if step.bind_as:
            if len(step.args.refs()) != 1:
                raise ScenarioError(f"{where}: `as` needs exactly one node")
            bound.add(step.bind_as)
        if step.id:
            if step.id in ids:
                raise ScenarioError(f"{where}: id {step.id!r} is used twice")
            ids.add(step.id)


def bound_ms(spec: str | float | None, settings: dict, variant: str | None, system=None,
             options: dict | None = None) -> float | None:
    """`max_ms`: a number, or "FACTOR * setting" using the scenario's (or the system's default) setting."""
    if spec is None or isinstance(spec, (int, float)):
        return spec
    m = re.fullmatch(r"\s*([0-9.]+)\s*[*x]\s*([a-z.]+)\s*", spec)
    if not m:
        raise ValueError(f"{spec!r}: use a number or FACTOR * setting, e.g. 1.5 * replica.lag.time.max.ms")
    system = system or registry.system()
    if system.setting_value is None:
        raise ValueError(f"system {system.name!r} has no settings to scale")
    options = system.parse_options(system.variant_options(variant) if options is None else options)
    return float(m.group(1)) * system.setting_value(m.group(2), settings, options)


# --------------------------------------------------------------------- loading
LIBRARY = Path(__file__).resolve().parent / "library"
# a system's own scripts may live in its package, systems/<name>/scenarios/*.yaml
SYSTEMS_DIR = Path(__file__).resolve().parents[1] / "systems"


def library() -> dict[str, Path]:
    """Scenario name -> its script: the shared library and every system's own folder."""
    found: dict[str, Path] = {}
    for path in [*sorted(LIBRARY.glob("*.yaml")), *sorted(SYSTEMS_DIR.glob("*/scenarios/*.yaml"))]:
        if path.stem in found:
            raise ScenarioError(f"scenario {path.stem!r} is defined twice: {found[path.stem]} and {path}")
        found[path.stem] = path
    return found


def list_scenarios() -> list[str]:
    return sorted(library())


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
    scripts = library()
    if name_or_path in scripts:
        return load_file(scripts[name_or_path])
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        return load_file(name_or_path)
    raise ScenarioError(f"unknown scenario {name_or_path!r} (known: {', '.join(list_scenarios())}); "
                        f"see `harness scenario --list`, or pass --file FILE.yaml")


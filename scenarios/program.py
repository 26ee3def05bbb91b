"""A scenario as a runner program: its script compiled to a stream of steps
(writes, faults, waits, sleeps, binds) that harness.runner.Run executes with
the same step loop (harness.steps.run_steps) and the same nemesis
(nemesis.nemesis.Nemesis) as a random run.

A step that cannot do what the script says (a `wait` that times out, a write
that is not acknowledged, a role that does not resolve) ends the steps with a
one-line error naming the step; the cluster is still torn down and the logs
collected, and the verdict is "unknown" (exit 2).
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from harness import run_store
from harness.spec import TestSpec
from history.writer import SCENARIO
from harness.steps import FaultStep, RunContext, Sleep, StepError, Txn, Write
from harness.sut import CHECKPOINTS, EVENTS, INSPECT, PROCESS, capabilities_of
from nemesis.fault import NodesRequest
from scenarios import conditions, results, roles
from scenarios.script import Scenario, Step, bound_ms, hosts_layout

OBSERVE_PERIOD = 0.1  # s between two looks of a `wait`
SAMPLE_PERIOD = 0.1  # s between two samples in samples.jsonl


def scenario_spec(scenario: Scenario, era: str | None, backend: str = "netns", store_root: str = "store",
                  subnet: str | None = None, check: bool = True, backend_options: dict | None = None,
                  options: dict | None = None) -> TestSpec:
    """The TestSpec of a scenario run (what test.json records); `era` is the system's variant;
    system options: the scenario's own, then the variant's, then `options` (--option)."""
    system = scenario.system_def()
    system_options = {**scenario.variant_options(era), **(options or {})}
    data = dict(name=f"{scenario.name}-{era}" if era else scenario.name, system=scenario.system,
                system_options=system_options, backend=backend, nodes=scenario.nodes,
                time_limit=1.0, seed=0, keys=scenario.keys, concurrency=1, acks=scenario.acks,
                replication_factor=scenario.replication_factor, settings=scenario.variant_settings(era),
                recovery_timeout=scenario.recovery_timeout, request_timeout=scenario.request_timeout,
                workload=scenario.workload, workload_options=dict(scenario.workload_options),
                store_root=store_root, check=check)
    if subnet:
        data["subnet"] = subnet
    if backend_options:
        data["backend_options"] = backend_options
    return TestSpec.model_validate(data)


@dataclass
class Bind:
    names: dict[str, str]
    program: "ScenarioProgram"
    action: str = "bind"
    index: int | None = None
    id: str | None = None

    async def run(self, ctx: RunContext) -> dict:
        for name, ref in self.names.items():
            ctx.aliases[name] = await ctx.node(ref)
        return {"bound": {k: ctx.aliases[k] for k in self.names}}


@dataclass
class Wait:
    step: Step
    program: "ScenarioProgram"
    action: str = "wait"
    index: int | None = None
    id: str | None = None

    async def run(self, ctx: RunContext) -> dict:
        p, a, cond = self.program, self.step.args, self.step.parsed
        started = ctx.history.now()
        if not p.epoch_baseline:
            await p.mark_epochs()
        if not p.epoch_baseline:
            p.epoch_baseline = {k: v.get("leader_epoch") for k, v in (await p.metadata() or {}).items()}
        deadline = time.monotonic() + a.timeout
        while True:
            obs = await p.observe(ctx, cond)
            holds, seen = conditions.evaluate(cond, obs)
            if holds:
                break
            if time.monotonic() >= deadline:
                raise StepError(f"timed out after {a.timeout:g} s waiting until `{cond.text}`; last seen: {seen}")
            await asyncio.sleep(OBSERVE_PERIOD)
        held = ctx.history.now()
        out = {"until": cond.text, "seen": seen, "waited_ms": round((held - started) / 1e6, 1), "done": held}
        if a.measure is not None:
            m = a.measure
            since, since_wall = ctx.step_done[m.since]
            ms = round((held - since) / 1e6, 1)
            bound = bound_ms(m.max_ms, p.scenario.variant_settings(p.variant), p.variant, ctx.system,
                             options=p.scenario.variant_options(p.variant))
            meas = {"name": m.name, "since": m.since, "ms": ms, "polled_ms": ms, "bound_ms": bound,
                    "within": None if bound is None else ms <= bound, "observed": seen,
                    "poll_period_ms": OBSERVE_PERIOD * 1000, "event": m.event, "since_wall": since_wall,
                    "source": "polling"}
            ctx.log(f"measured {m.name}: {ms:g} ms since {m.since}" + ("" if bound is None else f" (bound {bound:g} ms)"))
            out["measure"] = meas
        return out


class ScenarioProgram:
    """`harness scenario`: the script's steps in place of the random clients and schedule."""

    clients = False
    scripted = True
    sample_period = SAMPLE_PERIOD

    def __init__(self, scenario: Scenario, variant: str | None):
        self.scenario = scenario
        self.variant = variant
        self.faults = scenario.faults()
        self.layout: roles.Layout | None = None   # the run's hosts, from its plan (prepare)
        self.epoch_baseline: dict[int, int] = {}
        self.latest_epochs: dict[int, int] = {}
        self.ctx: RunContext | None = None
        self._client = None
        self._started = time.monotonic()

    # -- runner hooks --------------------------------------------------------
    def prepare(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.layout = hosts_layout(self.scenario, ctx.plan.roles)   # its options may change them
        ctx.resolve = self.resolve
        ctx.before_fault = self.mark_epochs
        run_store.write_json(ctx.store / run_store.SCENARIO, {
            "scenario": self.scenario.model_dump(mode="json", exclude={"steps"}),
            "steps": [_step_json(s) for s in self.scenario.steps],
            "judged": results.declared(self.scenario, self.variant)})

    def background(self, ctx: RunContext) -> list:
        return [self._watch_epochs()]

    async def steps(self, ctx: RunContext, deadline: float):
        for step in self.scenario.steps:
            if step.variants and self.variant not in step.variants:
                ctx.log(f"{step.label()}: skipped in {self.variant} (variants: {', '.join(step.variants)})")
                continue
            common = {"action": step.action, "index": step.index, "id": step.id}
            if step.fault is not None:
                yield FaultStep(step.fault, stop=step.stop, target=step.args, bind_as=step.bind_as, **common)
            elif step.action == "write":
                a = step.args
                yield Write(a.key, a.count, a.acks or self.scenario.acks, a.expect, parallel=a.parallel,
                            via=a.via, resolve=self.resolve, **common)
            elif step.action == "txn":
                a = step.args
                yield Txn(a.key, a.count, a.expect, coordinator_not=a.coordinator_not, coordinator=a.coordinator,
                          abort_after=a.abort_after,
                          background=a.background, resolve=self.resolve, **common)
            elif step.action == "wait":
                yield Wait(step, self, **common)
            elif step.action == "sleep":
                yield Sleep(step.args, **common)
            else:
                yield Bind(dict(step.args), self, **common)

    def describe(self, step) -> str:
        return _describe(getattr(step, "step", None) or _source(self.scenario, step.index))

    def finish(self, error: str | None) -> None:
        """After the logs are collected: what the scenario's verdict still needs goes into
        the history (process `scenario`): the error that stopped the steps, the system's log
        events (truncations, ISR changes), the scripted writes, the duration."""
        ctx = self.ctx
        if ctx is None:
            return
        if error is not None:
            ctx.history.append(SCENARIO, "fail", "error", error)
        if capabilities_of(ctx.db).has(EVENTS):
            events = []
            for node in ctx.plan.nodes:
                events += ctx.db.inspector.events(run_store.node_dir(ctx.store, node), node)
            ctx.history.append(SCENARIO, "info", "events", events)
        ctx.history.append(SCENARIO, "info", "end", {"writes": ctx.workload.writes,
                                                     "duration_s": round(time.monotonic() - self._started, 1)})

    # -- observing -----------------------------------------------------------
    def client(self):
        if self._client is None:
            # 2 s: a broker on a loaded machine may take over a second to answer, and the
            # freshest view needs a majority of the brokers' answers (Kafka: issue 42)
            self._client = self.ctx.db.client(2.0)
        return self._client

    async def metadata(self) -> dict[int, dict] | None:
        try:
            async with asyncio.timeout(2.5):
                meta = await self.client().metadata()
        except Exception:
            return None
        return {int(k): m.as_json() for k, m in meta.items()}

    async def meta_group(self) -> dict | None:
        """The metadata group's leader and members (Inspector.meta_group), or None."""
        try:
            async with asyncio.timeout(3.0):
                return await self.ctx.db.inspector.meta_group(list(self.ctx.plan.nodes))
        except Exception:
            return None

    async def resolve(self, ref_text: str, patience: float = 10.0) -> str:
        """A node reference -> a node. A metadata request that gets no answer, or
        an answer without the key (a NATS stream-info request can time out just
        after a resume), is asked again for up to `patience` seconds: one lost
        reply should not end the scenario as unknown."""
        ref = roles.parse_ref(ref_text, self.layout, set(self.ctx.aliases))
        if ref.kind in ("node", "alias"):
            return roles.resolve(ref, {}, self.ctx.aliases)
        deadline = time.monotonic() + patience
        if ref.meta:  # the metadata group, as the nodes' own reports name its leader
            while True:
                group = await self.meta_group()
                if (group and group.get("leader")) or time.monotonic() >= deadline:
                    return roles.resolve(ref, {}, self.ctx.aliases, group)
                await asyncio.sleep(0.5)
        while True:
            meta = await self.metadata()
            if (meta and ref.key in meta) or time.monotonic() >= deadline:
                return roles.resolve(ref, meta or {}, self.ctx.aliases)
            await asyncio.sleep(0.5)

    async def observe(self, ctx: RunContext, cond: conditions.Condition) -> conditions.Observation:
        meta_task = asyncio.create_task(self.metadata())
        nodes = list(ctx.plan.nodes)
        need = cond.needs()
        db = ctx.db
        obs = conditions.Observation(aliases=dict(ctx.aliases), epoch_baseline=dict(self.epoch_baseline))
        capabilities = capabilities_of(db)
        if capabilities.has(PROCESS) and (PROCESS in need or INSPECT in need):  # one look at the processes (a remote command per host on ssh/docker)
            obs.up = await asyncio.to_thread(lambda: {n: db.process.running(n) for n in ctx.plan.hosts})
        if capabilities.has(INSPECT):
            states = await asyncio.gather(*(db.inspector.state(n) if obs.up.get(n, True) else _none()
                                            for n in nodes))
            obs.states = {n: {k: s.as_json() for k, s in st.items()} for n, st in zip(nodes, states) if st is not None}
        obs.metadata = await meta_task
        if CHECKPOINTS in need:
            for ref in cond.checkpoint_refs():
                try:
                    node = roles.resolve(ref, obs.metadata or {}, obs.aliases)
                except roles.RefError:
                    continue
                obs.checkpoints[node] = await asyncio.to_thread(db.inspector.checkpoints, node)
        return obs

    async def _watch_epochs(self) -> None:
        """Keep the latest leader epochs at hand, so that a fault step records
        its baseline without a round trip before the fault (some faults must
        follow an acknowledgement within milliseconds)."""
        client = self.ctx.db.client(1.0)
        try:
            while True:
                try:
                    async with asyncio.timeout(1.5):  # not wait_for: its cancel can hang on 3.11 (inner task)
                        meta = await client.metadata()
                    self.latest_epochs = {int(k): m.epoch for k, m in meta.items()}
                except Exception:
                    pass
                await asyncio.sleep(OBSERVE_PERIOD)
        finally:
            await client.close()
            if self._client is not None:
                await self._client.close()

    async def mark_epochs(self) -> None:
        """The leader epochs before a fault: `election on key K` compares with these."""
        if self.latest_epochs:
            self.epoch_baseline = dict(self.latest_epochs)


async def _none():
    return None


def _source(scenario: Scenario, index: int | None) -> Step | None:
    return next((s for s in scenario.steps if s.index == index), None)


def _describe(step: Step | None) -> str:
    if step is None:
        return ""
    a = step.args
    if step.action == "wait":
        return f"until {a.until} (timeout {a.timeout:g} s)"
    if step.action == "write":
        return f"{a.count} x key {a.key}" + (f" acks={a.acks}" if a.acks else "")
    if step.action == "txn":
        return f"{a.count} x key {a.key} in one transaction" + (f", expect {a.expect}" if a.expect != "ok" else "")
    if isinstance(a, NodesRequest):
        return ", ".join(a.names) + (f" as {step.bind_as}" if step.bind_as else "")
    return "" if a is None else json.dumps(_args_json(a))


def _args_json(a: Any):
    if hasattr(a, "model_dump"):
        return a.model_dump(by_alias=True, exclude_defaults=True)
    if isinstance(a, NodesRequest):
        return a.names
    return a


def _step_json(step: Step) -> dict:
    return {"index": step.index, "action": step.action, "args": _args_json(step.args), "id": step.id,
            "as": step.bind_as, "variants": step.variants}

"""Steps: what the runner executes, whether they come from the random
schedule (nemesis.schedule) or from a scenario script (scenarios.compile).

A step stream is an async iterator of objects with `action` (a word for the
log), `async run(ctx) -> dict` and optional scenario bookkeeping (`index`,
`id`). `run_steps` is the one loop that executes them; a fault step goes to
the one Nemesis (nemesis.nemesis), so a scripted kill and a random kill are
the same code. Jepsen: a scripted nemesis is just another generator.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Protocol

from history.writer import SCENARIO, HistoryWriter
from harness.spec import TestSpec
from harness.sut import DB, HostPlan, System

if TYPE_CHECKING:
    from nemesis.nemesis import Nemesis


class StepError(RuntimeError):
    """A step could not do what it says; one line naming the step."""


class Workload(Protocol):
    """What the runner and the steps call on a workload (workloads/)."""

    writes: list[dict]                # scripted writes so far (Write steps)

    async def setup(self) -> None: ...

    async def run(self, deadline: float) -> None: ...

    async def final_reads(self, recovery_timeout: float) -> dict: ...

    async def close(self) -> None: ...

    async def write(self, key: int, count: int, acks: str, expect: str, step: int | None,
                    via: str | None = None) -> list[dict]: ...

    async def write_parallel(self, key: int, count: int, acks: str, step: int | None) -> list[dict]: ...

    # optional (a workload with transactions): one scripted transaction of the scenario's writer
    async def txn(self, key: int, count: int, expect: str, step: int | None,
                  coordinator_not: str | None = None, abort_after: float | None = None,
                  background: bool = False, coordinator: str | None = None) -> dict: ...


@dataclass
class RunContext:
    """What steps act on: one run's system, nemesis, workload and history. What a step
    did goes into the history (ops of process `scenario`), not into the context."""

    spec: TestSpec
    system: System
    db: DB
    plan: HostPlan
    history: HistoryWriter
    nemesis: "Nemesis"
    workload: Workload
    store: Path
    log: Callable[[str], None] = lambda m: None
    aliases: dict[str, str] = field(default_factory=dict)   # names bound by scenario steps
    step_done: dict[str, tuple] = field(default_factory=dict)  # step id -> (history ns, wall s) when done
    # node reference -> node name (scenario roles); plain node names by default
    resolve: Callable[[str], Awaitable[str]] | None = None
    before_fault: Callable[[], Awaitable[None]] | None = None  # e.g. note leader epochs before a fault

    async def node(self, ref: str) -> str:
        return ref if self.resolve is None else await self.resolve(ref)


@dataclass
class Sleep:
    seconds: float
    deadline: float | None = None     # time.monotonic() bound (the random schedule's end)
    action: str = "sleep"
    index: int | None = None
    id: str | None = None

    async def run(self, ctx: RunContext) -> dict:
        s = self.seconds if self.deadline is None else min(self.seconds, self.deadline - time.monotonic())
        await asyncio.sleep(max(0.0, s))
        return {}


@dataclass
class FaultStep:
    """Start or stop a registered fault on a target: a resolved `Target`, a
    scenario `Request` (node references resolved now), or None (stop all)."""

    fault: str
    stop: bool = False
    target: Any = None
    bind_as: str | None = None
    action: str = ""
    index: int | None = None
    id: str | None = None

    async def run(self, ctx: RunContext) -> dict:
        if ctx.before_fault is not None:
            await ctx.before_fault()
        target = self.target
        if target is not None and hasattr(target, "refs"):  # a scenario Request
            nodes = {ref: await ctx.node(ref) for ref in target.refs()}
            target = target.resolve(nodes.__getitem__, ctx.plan)
        if self.bind_as and target is not None:
            ctx.aliases[self.bind_as] = target.nodes[0]
        if self.stop:
            values = await ctx.nemesis.stop(self.fault, target)
            out = {"values": values}
        else:
            out = {"value": await ctx.nemesis.start(self.fault, target)}
        if target is not None:
            out["nodes"] = target.nodes
            if target.spec == "scripted" and isinstance(out.get("value"), dict) and "grudge" in out["value"]:
                out["grudge"] = out["value"]["grudge"]
        return {**out, "done": ctx.history.now(), "done_wall": time.time()}


@dataclass
class Write:
    key: int
    count: int = 1
    acks: str = "all"
    expect: str = "ok"
    parallel: bool = False
    via: str | None = None        # a node reference the writer connects through
    resolve: Callable[[str], Awaitable[str]] | None = None  # reference -> node (the scenario's roles)
    action: str = "write"
    index: int | None = None
    id: str | None = None

    async def run(self, ctx: RunContext) -> dict:
        """The workload's scripted writes (one that had to be acknowledged and was not: StepError)."""
        if self.parallel:
            return {"writes": await ctx.workload.write_parallel(self.key, self.count, self.acks, self.index)}
        via = None
        if self.via is not None:
            via = await self.resolve(self.via) if self.resolve else self.via
        writes = await ctx.workload.write(self.key, self.count, self.acks, self.expect, self.index, via=via)
        return {"writes": writes, **({"via": via} if via else {})}


@dataclass
class Txn:
    """One transaction of the workload's scripted transactional writer (a scenario `txn` step):
    begin, `count` sends to key, commit; recorded as the workload's `txn` op."""
    key: int
    count: int = 1
    expect: str = "ok"
    coordinator_not: str | None = None   # a node reference: the writer's coordinator must be another node
    coordinator: str | None = None       # a node reference: the writer's coordinator must be that node
    abort_after: float | None = None     # s the application waits for a send before it aborts
    background: bool = False             # started, not waited for: the steps after it run meanwhile
    resolve: Callable[[str], Awaitable[str]] | None = None
    action: str = "txn"
    index: int | None = None
    id: str | None = None

    async def run(self, ctx: RunContext) -> dict:
        scripted = getattr(ctx.workload, "txn", None)
        if scripted is None:
            raise StepError("this run's workload has no transactions (scenario `workload: queue`)")
        avoid = None
        if self.coordinator_not is not None:
            avoid = await self.resolve(self.coordinator_not) if self.resolve else self.coordinator_not
        want = None
        if self.coordinator is not None:
            want = await self.resolve(self.coordinator) if self.resolve else self.coordinator
        return await scripted(self.key, self.count, self.expect, self.index, coordinator_not=avoid,
                              abort_after=self.abort_after, background=self.background, coordinator=want)


def label(step) -> str:
    if step.index is None:
        return step.action
    return f"step {step.index} ({step.action}{' ' + step.id if step.id else ''})"


async def run_steps(steps: AsyncIterator, ctx: RunContext, describe: Callable[[Any], str] = lambda s: "") -> None:
    """Execute a step stream in order. Scenario steps (with an index) are
    recorded in the history (`record_step`); any failure becomes a StepError naming the step."""
    aliases = dict(ctx.aliases)
    async for step in steps:
        scripted = step.index is not None
        start = ctx.history.now()
        if scripted:
            ctx.log(f"{label(step)}: {describe(step)}".rstrip(": "))
        try:
            detail = await step.run(ctx)
        except StepError as e:
            raise StepError(f"{label(step)}: {e}") from None
        except asyncio.CancelledError:
            raise
        except Exception as e:
            text = str(e) if isinstance(e, (LookupError, ValueError)) else f"{type(e).__name__}: {e}"
            raise StepError(f"{label(step)}: {text}"[:400]) from None
        if not scripted:
            continue
        entry = {"index": step.index, "action": step.action, "id": step.id, "start": start,
                 "end": ctx.history.now(), **(detail or {})}
        entry.setdefault("done_wall", time.time())
        bound = {name: node for name, node in ctx.aliases.items() if aliases.get(name) != node}
        record_step(ctx.history, entry, bound)
        aliases = dict(ctx.aliases)
        if step.id:
            ctx.step_done[step.id] = (entry.get("done", entry["end"]), entry["done_wall"])


def record_step(history: HistoryWriter, entry: dict, bound: dict[str, str]) -> None:
    """A scripted step into the history (process `scenario`, docs/interfaces.md): the step
    as it ran (f "step"), the role bindings it made (f "bind") and its measurement (f
    "measure"). `harness check` rebuilds the scenario's verdict from these."""
    history.append(SCENARIO, "info", "step", entry)
    if bound:
        history.append(SCENARIO, "info", "bind", bound)
    if isinstance(entry.get("measure"), dict):
        history.append(SCENARIO, "info", "measure", entry["measure"])

"""One test run: spec -> hosts -> system under test -> steps (random or
scripted) + workload -> history -> collect -> check -> exit code.

There is one runner. A `Program` says what happens between setup and the
final phase: `RandomProgram` (the workload's random clients plus the seeded
fault schedule, nemesis.schedule) or a scenario (scenarios.program:
its script compiled to steps). Both feed a step stream to
`harness.steps.run_steps`, whose fault steps go to the one
`nemesis.nemesis.Nemesis`. Everything a run starts (clients, step stream,
sampler, progress ticker, a program's watchers) lives in one asyncio
TaskGroup and is cancelled by structure.

The run loop (`Run._drive`, in the client thread) returns an `Outcome`, a
frozen record of what the main thread still needs from it (the dumps to
write, the failure); everything else the run found is in the history, the
run's one record: `test.json` (the resolved spec) is written once, when the
history starts (or when the run aborts before it), and the final reads'
outcome is a history op. A scenario's steps, bindings and measurements are
history ops too (harness.steps), so `harness check` rebuilds its verdict.

Teardown is unconditional: Ctrl-C, SIGTERM or an error tear down every
process, namespace and rule (recorded in the run record first, so that even a
SIGKILLed harness can be cleaned up by `harness cleanup`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
import secrets
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import AsyncIterator, Mapping, Protocol

from harness import registry, run_store, verdict
from harness.cleanup import RunRecord, release
from harness.cluster.base import ClusterError
from history.writer import FINAL_READS, HistoryWriter
from harness.progress import Progress
from harness.sampler import Sampler
from harness.spec import TestSpec
from harness.steps import RunContext, StepError, run_steps
from harness.sut import DUMP, INSPECT, RunShape, Unsupported, capabilities_of
from nemesis.fault import FaultEnv

WORK_ROOT = Path(os.environ.get("HARNESS_WORK_ROOT", "/var/tmp/harness"))


class RunError(RuntimeError):
    """The run could not proceed (exit 2); the message is one line."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM: tear down and exit 2."""


@dataclass(frozen=True)
class Outcome:
    """What the run loop hands back to the main thread (immutable)."""

    dumps: Mapping[str, dict] = field(default_factory=lambda: MappingProxyType({}))  # node -> replica dump
    error: str | None = None        # the run's tasks failed (exit 2)
    step_error: str | None = None   # a scripted step stopped the steps (unknown verdict)


class Program(Protocol):
    """What a run does between setup and the final phase."""

    faults: list[str]           # faults it may use (checked before any host exists)
    clients: bool               # the workload's random clients run until the time limit
    scripted: bool              # a failed step ends the steps with an unknown verdict (else the run aborts)
    sample_period: float

    def steps(self, ctx: RunContext, deadline: float) -> AsyncIterator: ...

    def background(self, ctx: RunContext) -> list: ...   # coroutines run alongside (watchers)

    def describe(self, step) -> str: ...

    def prepare(self, ctx: RunContext) -> None: ...      # before the steps (e.g. write scenario.json)

    def finish(self, error: str | None) -> None: ...  # after the logs are collected: its last history ops


class RandomProgram:
    """`harness run`: random clients and the seeded random fault schedule."""

    clients = True
    scripted = False
    sample_period = 0.25

    def __init__(self, spec: TestSpec):
        self.spec = spec
        self.faults = list(spec.nemesis)

    def steps(self, ctx, deadline):
        from nemesis.schedule import random_steps

        if self.spec.nemesis_mode == "targeted":
            from nemesis.targeted import targeted_steps

            return targeted_steps(ctx, self.faults, self.spec.seed, self.spec.nemesis_interval, deadline,
                                  ctx.db.inspector, getattr(ctx.workload, "in_flight", None))
        return random_steps(ctx, self.faults, self.spec.seed, self.spec.nemesis_interval, deadline,
                            leader=ctx.workload.leader_node,
                            under_replicated=getattr(ctx.workload, "under_replicated", None))

    def background(self, ctx):
        return []

    def describe(self, step) -> str:
        return ""

    def prepare(self, ctx) -> None:
        pass

    def finish(self, error) -> None:
        pass


def preflight(spec: TestSpec, program: Program) -> None:
    """Checks that must pass before anything is created."""
    system = spec.system_def()
    if spec.backend == "netns" and os.geteuid() != 0:
        raise RunError("the netns backend needs root (network namespaces, veths, iptables): run as root")
    for folder in system.code:
        if not (run_store.REPO_DIR / folder).is_dir():
            raise RunError(f"no {folder}/ under {run_store.REPO_DIR}; run from a full checkout")
    try:
        capabilities = spec.capabilities()
        if getattr(spec, "nemesis_mode", "random") == "targeted" and program.faults:
            capabilities.require(INSPECT, "--nemesis-mode targeted")
        for fault in program.faults:
            kind = registry.fault(fault)
            capabilities.require_fault(kind)
            if kind.preflight is not None:
                kind.preflight(spec.backend, capabilities)
        if system.check_settings is not None:
            system.check_settings(spec.settings, spec.options())
    except (Unsupported, registry.RegistryError) as e:
        raise RunError(str(e)) from None
    except ValueError as e:
        raise RunError(f"--set: {e}") from None
    except RuntimeError as e:  # a fault's preflight: this machine cannot do it
        raise RunError(str(e).splitlines()[0]) from None
    if spec.backend == "netns":
        from harness.cluster.netns import host_addresses
        try:
            host_addresses(spec.subnet, spec.nodes, tuple(system.host_plan(spec.nodes, spec.options(), spec.settings).roles.values()))
        except ClusterError as e:
            raise RunError(str(e)) from None


def make_cluster(spec: TestSpec, run_id: str, record: RunRecord, work_dir: str, roles: tuple[str, ...],
                 faults: list[str] = ()):
    """The backend registered under spec.backend (replog.backends), with the system's role hosts
    and the backend options the run's faults ask for (power: FUSE in docker containers)."""
    try:
        factory = registry.backend(spec.backend).make_cluster
    except (registry.RegistryError, AttributeError) as e:
        raise RunError(f"backend {spec.backend!r} is not available ({e}); use --backend netns") from None
    extra = {}
    for fault in faults:
        extra.update(registry.fault(fault).extra.get("backend_options", {}))
    if extra:
        spec = spec.model_copy(update={"backend_options": {**extra, **(spec.backend_options or {})}})
    return factory(spec, run_id, record, work_dir, roles=roles)


def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still pending (after Ctrl-C) and let their finally blocks run, as
    asyncio.run does: a loop closed over them leaves client close() coroutines unawaited."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=5))
    loop.run_until_complete(loop.shutdown_asyncgens())


class Run:
    def __init__(self, spec: TestSpec, program: Program | None = None, progress: Progress | None = None):
        self.spec = spec
        self.program = program or RandomProgram(spec)
        self.system = spec.system_def()
        self.plan = self.system.host_plan(spec.nodes, spec.options(), spec.settings)
        self.run_id = secrets.token_hex(3)
        self.store: Path | None = None
        self.progress = progress
        self.history: HistoryWriter | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.main_task: asyncio.Task | None = None
        self.db = None
        self.cluster = None
        self.fault_env = None
        self.outcome: Outcome | None = None
        self.results: dict | None = None
        self._test_written = False
        self._started = time.monotonic()

    @property
    def step_error(self) -> str | None:
        return self.outcome.step_error if self.outcome is not None else None

    def _write_test(self, t0_wall: float | None) -> None:
        """test.json, once: the resolved spec and the wall clock at history time 0."""
        if self._test_written:
            return
        self._test_written = True
        run_store.write_json(self.store / run_store.TEST, {
            **self.spec.model_dump(), "variant": self.spec.variant, "run_id": self.run_id,
            "start": self._start, "faults": self._fault_table(), "t0_wall": t0_wall})

    # ------------------------------------------------------------------
    def execute(self) -> int:
        spec = self.spec
        preflight(spec, self.program)
        self.store = run_store.create_run_dir(spec.store_root, spec.name).resolve()
        self._start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        log = open(self.store / run_store.HARNESS_LOG, "a", encoding="utf-8")
        self.progress = self.progress or Progress()
        self.progress.log_file = log
        self.progress.message(f"store {self.store}")
        old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
        record = RunRecord(self.run_id, store=str(self.store))
        cluster = None
        interrupted = None
        error = None
        try:
            record.save()
            cluster = make_cluster(spec, self.run_id, record, str(WORK_ROOT / self.run_id),
                                   tuple(self.plan.roles.values()), self.program.faults)
            self._run_cluster(cluster)
        except Interrupted as e:
            interrupted = str(e)
        except (ClusterError, RunError, Unsupported) as e:
            error = str(e)
        except Exception as e:  # a bug or an unexpected failure: still exit 2, never 1
            error = f"{type(e).__name__}: {e}"
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.progress.message("tearing down")
                if error and cluster is not None:
                    self._collect_after_error()
                self._release_faults()
                if cluster is not None:
                    cluster.destroy()
                release(record)  # whatever a failed backend constructor recorded
                record.remove_file()
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
                if self.history:
                    self.history.close()
                self._write_test(None)   # the run ended before its history started
        if interrupted or error:
            msg = f"interrupted by {interrupted}" if interrupted else error
            hist = self.store / run_store.HISTORY
            if hist.exists() and hist.stat().st_size > 0:
                msg += f"; the partial history is checkable: harness check {self.store}"
            self.progress.message(f"run aborted: {msg}")
            run_store.link_latest(self.store)
            log.close()
            return 2
        rc = self._check()
        run_store.link_latest(self.store)
        log.close()
        return rc

    def _collect_after_error(self) -> None:
        """A run that failed (a node that never came up, a system that never got
        ready) still leaves the nodes' logs in the store: they say why. Best effort:
        the processes are stopped first, and nothing here may hide the error."""
        db = getattr(self, "db", None)
        if db is None:
            return
        try:
            db.teardown()
            for node in db.hosts:
                try:
                    db.collect(node, run_store.node_dir(self.store, node))
                except Exception:
                    pass
        except Exception as e:
            self.progress.message(f"could not collect the nodes' logs: {type(e).__name__}: {e}")

    def _fault_table(self) -> dict:
        """The run's faults as the history names them, for the reports: {fault: {start, stop, colour}}."""
        out = {}
        for name in registry.faults_for(self.spec.capabilities()):
            kind = registry.fault(name)
            out[name] = {"start": kind.start, "stop": kind.stop, "colour": kind.colour}
        return out

    def _check(self) -> int:
        self.progress.message("checking")
        if not self.spec.check:
            self.results = verdict.unchecked(self.store, "checkers skipped (--no-check)")
        else:
            try:
                self.results = verdict.check_store(self.store)
            except Exception as e:  # a checker crash is an unknown verdict, not a pass
                self.results = verdict.unchecked(self.store, f"checker failed: {type(e).__name__}: {e}")
        self.progress.message("verdict: " + verdict.summary(self.results))
        sc = self.results.get("scenario") or {}
        if sc.get("expected") is not None:
            self.progress.message(f"expected {sc['expected']}: {'met' if sc['as_expected'] else 'NOT met'}")
        self._report()
        self.progress.message(f"store {self.store}")
        return verdict.exit_code(self.results) if self.spec.check else 2

    def _report(self) -> None:
        """report.html when reports/ is there; never changes the verdict."""
        try:
            build = importlib.import_module("reports").build_report
        except (ImportError, AttributeError):
            return
        try:
            self.progress.message(f"report {build(str(self.store))}")
        except Exception as e:
            self.progress.message(f"report failed: {type(e).__name__}: {e}")

    # ------------------------------------------------------------------
    def _run_cluster(self, cluster) -> None:
        spec, progress = self.spec, self.progress
        roles = ", ".join(self.plan.roles.values())
        progress.message(f"creating {spec.backend} cluster {self.run_id}: {spec.nodes} nodes"
                         + (f" + {roles}" if roles else ""))
        cluster.create()
        self.cluster = cluster
        shape = RunShape(nodes=spec.nodes, keys=spec.keys, replication_factor=spec.replication_factor,
                         settings=dict(spec.settings))
        self.db = self.system.make_db(cluster, self.plan, shape, spec.options())
        self.fault_env = FaultEnv(self.db, cluster.remotes, self.plan, spec.nemesis_interval, progress.message,
                                  cluster=cluster)
        for fault in self.program.faults:  # before the system starts: mounts, LD_PRELOAD
            kind = registry.fault(fault)
            if kind.prepare is not None:
                kind.prepare(self.fault_env)
        variant = f" ({self.system.variant_option} {spec.variant})" if spec.variant else ""
        progress.message(f"starting {self.system.name}{variant}")
        self.db.setup()
        self.history = HistoryWriter(str(self.store / run_store.HISTORY))
        self._write_test(self.history.t0_wall)
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="clients")
        future = pool.submit(self._client_thread, cluster)
        try:
            while True:     # short waits: the main thread must see SIGINT/SIGTERM
                try:
                    outcome = future.result(0.2)
                    break
                except concurrent.futures.TimeoutError:
                    continue
        except Interrupted:
            if self.loop is not None and self.main_task is not None:
                self.loop.call_soon_threadsafe(self.main_task.cancel)
            concurrent.futures.wait([future], 15)
            raise
        finally:
            pool.shutdown(wait=False)
        self.outcome = outcome
        if outcome.error is not None:
            raise RunError(outcome.error.removeprefix("RuntimeError: "))
        progress.message(f"stopping {self.system.name}, collecting logs and dumps")
        self.db.teardown()
        self._release_faults()
        for node in self.db.hosts:
            self.db.collect(node, run_store.node_dir(self.store, node))
        for node, dump in outcome.dumps.items():
            run_store.write_dump(self.store, node, dump)
        self.program.finish(outcome.step_error)

    def _release_faults(self) -> None:
        """The faults' release hooks (unmount ...), once; never stops the teardown."""
        env, self.fault_env = self.fault_env, None
        if env is None:
            return
        for fault in self.program.faults:
            kind = registry.fault(fault)
            if kind.release is not None:
                try:
                    kind.release(env)
                except Exception as e:
                    self.progress.message(f"fault {fault}: release failed: {type(e).__name__}: {e}")

    def _client_thread(self, cluster) -> Outcome:
        """The run loop in its own thread and event loop; -> its Outcome (failures included)."""
        try:
            cluster.enter_client_network()
            self.loop = asyncio.new_event_loop()
            self.loop.set_exception_handler(self._loop_exception)
            self.main_task = self.loop.create_task(self._drive())
            return self.loop.run_until_complete(self.main_task)
        except asyncio.CancelledError:
            return Outcome(error="cancelled")
        except BaseException as e:  # reported by the main thread
            while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
                e = e.exceptions[0]     # a task group's one failure: name it, not the group
            self.progress.message("the run's tasks failed:\n" + "".join(traceback.format_exception(e)).rstrip())
            return Outcome(error=f"{type(e).__name__}: {e}")
        finally:
            if self.loop is not None:
                _drain(self.loop)
                self.loop.close()

    def _loop_exception(self, loop, context: dict) -> None:
        """Stray task errors of a client library go to harness.log only."""
        exc = context.get("exception")
        text = f"{type(exc).__name__}: {exc}" if exc else context.get("message", "")
        self.progress.message_to_log(f"asyncio: {text}")

    async def _drive(self) -> Outcome:
        from nemesis.nemesis import Nemesis

        spec, progress, history, db, program = self.spec, self.progress, self.history, self.db, self.program
        workload = registry.workload(spec.workload).make(spec, db, history, progress.message)
        nemesis = Nemesis(self.fault_env, history, spec.seed, log=progress.message)
        dumps: dict[str, dict] = {}
        step_error: str | None = None
        ctx = RunContext(spec=spec, system=self.system, db=db, plan=self.plan, history=history,
                                     nemesis=nemesis, workload=workload, store=self.store, log=progress.message)
        progress.message(f"creating the log ({spec.keys} keys, replication factor {spec.replication_factor})")
        await workload.setup()
        program.prepare(ctx)
        capabilities = capabilities_of(db)
        inspector = db.inspector if capabilities.has(INSPECT) else None
        time_limit = spec.time_limit if program.clients else 0
        if program.clients:
            progress.message(f"workload: {spec.time_limit:g}s, {spec.concurrency} clients, {spec.rate:g} ops/s, "
                             f"nemesis {','.join(program.faults) or 'none'} (seed {spec.seed})")
        try:
            async with asyncio.TaskGroup() as tg:
                watchers = [tg.create_task(c) for c in program.background(ctx)]
                if inspector is not None:
                    sampler = Sampler(str(self.store / run_store.SAMPLES), inspector, self.plan.nodes, history,
                                      period=program.sample_period)
                    watchers.append(tg.create_task(sampler.run()))
                if time_limit:
                    watchers.append(tg.create_task(self._ticker(time.monotonic(), time_limit)))
                try:
                    step_error = await self._main(ctx, time.monotonic() + time_limit)
                    if step_error is None:
                        progress.message("final phase: healing every fault, restarting every node")
                        await nemesis.final()
                        final = await workload.final_reads(spec.recovery_timeout)
                        # how far each key was read back, and any unreadable hole: a history op
                        history.nemesis(FINAL_READS, final)
                        progress.message(f"final reads: {final}")
                finally:
                    for w in watchers:
                        w.cancel()
                    await workload.close()
            if capabilities.has(DUMP) and inspector is not None:
                found = await asyncio.gather(*(inspector.dump(n) for n in self.plan.nodes))
                dumps = {n: d for n, d in zip(self.plan.nodes, found) if d is not None}
                dumps.update(await inspector.more_dumps())   # copies besides the nodes (a remote tier)
        finally:
            if inspector is not None:
                await inspector.close()
        return Outcome(dumps=MappingProxyType(dumps), step_error=step_error)

    async def _main(self, ctx: RunContext, deadline: float) -> str | None:
        """The clients (random runs) and the step stream, side by side; -> the error that
        stopped a scripted program's steps, if one did."""
        if self.program.clients:
            self.progress.start_run(self.spec.time_limit)
        step_error = None
        try:
            async with asyncio.TaskGroup() as tg:
                if self.program.clients:
                    tg.create_task(ctx.workload.run(deadline))
                tg.create_task(run_steps(self.program.steps(ctx, deadline), ctx, self.program.describe))
        except* StepError as eg:
            step_error = str(eg.exceptions[0])
        finally:
            self.progress.end_run()
        if step_error is not None:
            if not self.program.scripted:
                raise RunError(f"nemesis: {step_error}")
            self.progress.message(f"steps stopped: {step_error}")
        return step_error

    async def _ticker(self, start: float, total: float) -> None:
        while True:
            self.progress.update(time.monotonic() - start, self.history.counts)
            await asyncio.sleep(1)

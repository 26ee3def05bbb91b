"""Run one scenario on a real cluster.

`ScenarioRun` is the harness runner (`harness.runner.Run`: cluster creation,
replica start, signal handling, teardown, log and dump collection, checkers,
report) with the random workload and fault schedule replaced by the script's
steps. Everything a step does goes into history.jsonl (every write's invoke
and completion, every fault as a nemesis op); the sampler writes
samples.jsonl; the final phase heals everything and reads every key, exactly
as `harness run` does, so the store has the same layout.

A step that cannot do what the script says (a `wait` that times out, a write
that is not acknowledged, a role that does not resolve) ends the steps with a
one-line error naming the step; the cluster is still torn down and the logs
collected, and the verdict is "unknown" (exit 2).
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import tempfile
import time


from harness import verdict
from harness.cluster.base import CONTROLLER, ClusterError
from harness.runner import Run
from harness.spec import TestSpec
from harness.store import write_json
from nemesis import grudges
from nemesis.scenarios import conditions, results, roles
from replica import storage
from nemesis.scenarios.script import NODE_ACTIONS, Scenario, Step, bound_ms

TOPIC = "log"
OBSERVE_PERIOD = 0.1  # s between two looks of a `wait`
SAMPLE_PERIOD = 0.1  # s between two samples in samples.jsonl
CHECKPOINT_FILE = "replication-offset-checkpoint"


class StepError(RuntimeError):
    """The script could not be carried out; one line naming the step."""


def scenario_spec(scenario: Scenario, era: str, backend: str = "netns", store_root: str = "store",
                  subnet: str | None = None, check: bool = True,
                  backend_options: dict | None = None) -> TestSpec:
    """The TestSpec of a scenario run (what test.json records)."""
    data = dict(name=f"{scenario.name}-{era}", era=era, backend=backend, nodes=scenario.nodes,
                time_limit=1.0, seed=0, keys=scenario.keys, concurrency=1, acks=scenario.acks,
                replication_factor=scenario.replication_factor, settings=dict(scenario.settings),
                recovery_timeout=scenario.recovery_timeout, store_root=store_root, check=check)
    if subnet:
        data["subnet"] = subnet
    if backend_options:
        data["backend_options"] = backend_options
    return TestSpec.model_validate(data)


def _acks(a: str):
    return a if a == "all" else int(a)


def _err(e: BaseException) -> str:
    return (type(e).__name__ + (f": {e}" if str(e) else ""))[:200]


class ScenarioRun(Run):
    """One scenario in one era; `execute()` returns the exit code."""

    def __init__(self, spec: TestSpec, scenario: Scenario, progress=None):
        super().__init__(spec, progress)
        self.scenario = scenario
        self.step_error: str | None = None
        self.aliases: dict[str, str] = {}
        self.step_log: list[dict] = []
        self.measurements: list[dict] = []
        self.writes: list[dict] = []
        self.final: dict | None = None
        self.epoch_baseline: dict[int, int] = {}
        self.results: dict | None = None
        self._step_done: dict[str, int] = {}  # step id -> history time (ns) when its action was done
        self._started = time.monotonic()

    # ------------------------------------------------------------------ run
    async def _drive(self, cluster, db, result: dict) -> None:
        from nemesis import faults as nf
        from workloads.log import LogWorkload, Sampler, WorkloadConfig, collect_dumps

        spec, history = self.spec, self.history
        write_json(self.store / "scenario.json", {"scenario": self.scenario.model_dump(mode="json",
                                                                                       exclude={"steps"}),
                                                  "steps": [_step_json(s) for s in self.scenario.steps]})
        topic_config = {k: v for k, v in spec.settings.items()
                        if k in ("min.insync.replicas", "unclean.leader.election.enable")}
        cfg = WorkloadConfig(keys=spec.keys, concurrency=1, acks=spec.acks,
                             replication_factor=spec.replication_factor, topic_config=topic_config)
        self.db, self.cluster = db, cluster
        self.bootstrap = db.bootstrap() + [db.address(CONTROLLER)]
        self.wl = LogWorkload(cfg, self.bootstrap, history, log=self.progress.message)
        self.progress.message(f"creating topic {TOPIC} ({spec.keys} partitions, rf {spec.replication_factor})")
        await self.wl.setup()
        self.brokers = {n: db.broker_id(n) for n in db.brokers}
        sampler = Sampler(str(self.store / "samples.jsonl"), self.brokers, self.bootstrap, history,
                          period=SAMPLE_PERIOD)
        sampler_task = asyncio.create_task(sampler.run())
        self.network = nf.Network(cluster.remotes)
        self.rc = self.wl.rc
        self.latest_epochs: dict[int, int] = {}
        watch_task = asyncio.create_task(self._watch_epochs())
        self.obs_client = self.rc.Client(bootstrap=self.bootstrap, request_timeout=1.0)
        self.writer = self.wl.client()
        self.process = self.wl._new_process()
        self.values = itertools.count(1)
        try:
            try:
                for step in self.scenario.steps:
                    await self._run_step(step)
            except StepError as e:
                self.step_error = str(e)
                self.progress.message(f"scenario stopped: {e}")
            if self.step_error is None:
                self.progress.message("final phase: healing every fault, restarting every node")
                healed = await asyncio.to_thread(self._heal_all, db, self.network)
                history.nemesis("final", healed)
                self.final = await self.wl.final_reads(spec.recovery_timeout)
                self.progress.message(f"final reads: {self.final}")
        finally:
            sampler_task.cancel()
            watch_task.cancel()
            await asyncio.gather(sampler_task, watch_task, return_exceptions=True)
            for c in (self.obs_client, self.writer):
                try:
                    await asyncio.wait_for(c.close(), 2.0)
                except Exception:
                    pass
        result["dumps"] = await collect_dumps(self.bootstrap, self.brokers)
        result["final"] = self.final
        result["samples"] = sampler.count

    async def _run_step(self, step: Step) -> None:
        label = step.label()
        if step.eras is not None and self.spec.era not in step.eras:
            self.progress.message(f"{label}: skipped in era {self.spec.era} (eras: {', '.join(step.eras)})")
            return
        start = self.history.now()
        self.progress.message(f"{label}: {_describe(step)}")
        entry = {"index": step.index, "action": step.action, "id": step.id, "start": start}
        try:
            detail = await getattr(self, f"_do_{step.action}")(step)
        except roles.RefError as e:
            raise StepError(f"{label}: {e}") from None
        except StepError:
            raise
        except Exception as e:
            raise StepError(f"{label}: {_err(e)}") from None
        entry.update(end=self.history.now(), **(detail or {}))
        entry.setdefault("done_wall", time.time())
        self.step_log.append(entry)
        if step.id:
            self._step_done[step.id] = (entry.get("done", entry["end"]), entry["done_wall"])

    # ------------------------------------------------------------------ observing
    async def _metadata(self) -> dict[int, dict] | None:
        try:
            meta = await asyncio.wait_for(self.obs_client.metadata(TOPIC), 1.5)
        except Exception:
            return None
        return {int(k): v for k, v in meta.items()}

    async def _state(self, node: str, running: bool) -> dict[int, dict] | None:
        if not running:
            return None
        try:
            st = await asyncio.wait_for(self.obs_client.state(self.brokers[node]), 0.5)
        except Exception:
            return None
        return {int(p["partition"]): p for p in st.get("partitions", []) if p.get("topic") == TOPIC}

    def _read_checkpoint(self, node: str) -> dict[int, int]:
        path = os.path.join(self.db.node_dir(node), "data", CHECKPOINT_FILE)
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, CHECKPOINT_FILE)
            try:
                self.cluster.remotes[node].get(path, local)
                offsets = storage.read_offset_checkpoint(local)
            except (OSError, ClusterError, storage.StorageError, subprocess.SubprocessError):
                return {}  # not written yet, or the node is unreachable right now
        return {p: hw for (t, p), hw in offsets.items() if t == TOPIC}

    async def _observe(self, cond: conditions.Condition | None = None) -> conditions.Observation:
        meta_task = asyncio.create_task(self._metadata())
        nodes = list(self.brokers)
        # one look at the processes (a remote command per host on the ssh/docker backends)
        up = await asyncio.to_thread(lambda: {n: self.db.running(n) for n in [*nodes, CONTROLLER]})
        states = await asyncio.gather(*(self._state(n, up[n]) for n in nodes))
        obs = conditions.Observation(metadata=await meta_task, aliases=dict(self.aliases),
                                     epoch_baseline=dict(self.epoch_baseline))
        obs.states = {n: s for n, s in zip(nodes, states) if s is not None}
        obs.up = up
        if cond is not None:
            for ref in cond.checkpoint_refs():
                try:
                    node = roles.resolve(ref, obs.metadata or {}, obs.aliases)
                except roles.RefError:
                    continue
                obs.checkpoints[node] = await asyncio.to_thread(self._read_checkpoint, node)
        return obs

    async def _resolve(self, ref_text: str) -> str:
        layout = roles.Layout(self.scenario.nodes, self.scenario.keys, self.scenario.replication_factor)
        ref = roles.parse_ref(ref_text, layout, set(self.aliases))
        meta = {} if ref.kind in ("node", "alias") else (await self._metadata() or {})
        return roles.resolve(ref, meta, self.aliases)

    async def _watch_epochs(self) -> None:
        """Keep the controller's latest leader epochs at hand, so that a fault
        step records its baseline without a round trip before the fault (some
        faults must follow an acknowledgement within milliseconds)."""
        client = self.rc.Client(bootstrap=self.bootstrap, request_timeout=1.0)
        try:
            while True:
                try:
                    meta = await asyncio.wait_for(client.metadata(TOPIC), 1.5)
                    self.latest_epochs = {int(k): v.get("leader_epoch") for k, v in meta.items()}
                except Exception:
                    pass
                await asyncio.sleep(OBSERVE_PERIOD)
        finally:
            try:
                await asyncio.wait_for(client.close(), 2.0)
            except Exception:
                pass

    async def _mark_epochs(self) -> None:
        """The leader epochs before a fault: `election on key K` compares with these."""
        if self.latest_epochs:
            self.epoch_baseline = dict(self.latest_epochs)

    # ------------------------------------------------------------------ steps
    async def _do_bind(self, step: Step) -> dict:
        for name, ref in step.args.items():
            self.aliases[name] = await self._resolve(ref)
        return {"bound": {k: self.aliases[k] for k in step.args}}

    async def _do_write(self, step: Step) -> dict:
        a = step.args
        acks = a.acks or self.scenario.acks
        await self._refresh_writer()
        done = []
        for _ in range(a.count):
            done.append(await self._send(step, a.key, acks, a.expect))
        return {"writes": done}

    async def _refresh_writer(self) -> None:
        try:
            await asyncio.wait_for(self.writer.metadata(TOPIC), 3.0)
        except Exception:
            pass

    async def _send(self, step: Step, key: int, acks: str, expect: str) -> dict:
        """One send (a definite failure before the append is retried twice
        after a metadata refresh: e.g. a stale leader); every try is in the history."""
        for attempt in range(3):
            value = next(self.values)
            op = self.history.invoke(self.process, "send", [key, value])
            record = {"key": key, "value": value, "acks": acks, "step": step.index, "invoke": op["index"]}
            try:
                offset = await asyncio.wait_for(
                    self.writer.produce(TOPIC, key, value, acks=_acks(acks)), self.writer.request_timeout + 2)
            except self.rc.DefiniteError as e:
                done = self.history.complete(op, "fail", [key, value], error=_err(e))
                record.update(type="fail", error=_err(e), complete=done["index"])
                self.writes.append(record)
                if expect == "ok" and attempt < 2:
                    await asyncio.sleep(0.3)
                    await self._refresh_writer()
                    continue
                break
            except Exception as e:  # indefinite: a new process continues (Jepsen's rule)
                done = self.history.complete(op, "info", [key, value], error=_err(e))
                record.update(type="info", error=_err(e), complete=done["index"])
                self.writes.append(record)
                self.process = self.wl._new_process()
                break
            done = self.history.complete(op, "ok", [key, [offset, value]])
            record.update(type="ok", offset=offset, complete=done["index"])
            self.writes.append(record)
            return record
        if expect == "ok":
            raise StepError(f"{step.label()}: send of {value} to key {key} (acks={acks}) was not "
                            f"acknowledged: {record['type']} {record.get('error', '')}".rstrip())
        return record

    async def _do_kill(self, step: Step) -> dict:
        return await self._node_action(step, "kill")

    async def _do_restart(self, step: Step) -> dict:
        return await self._node_action(step, "start")

    async def _do_pause(self, step: Step) -> dict:
        return await self._node_action(step, "pause")

    async def _do_resume(self, step: Step) -> dict:
        return await self._node_action(step, "resume")

    async def _node_action(self, step: Step, f: str) -> dict:
        await self._mark_epochs()
        nodes = [await self._resolve(ref) for ref in step.args]
        if step.bind_as:
            self.aliases[step.bind_as] = nodes[0]
        await asyncio.to_thread(self._apply_node_action, f, nodes)
        self.history.nemesis(f, nodes)
        return {"nodes": nodes, "done": self.history.now(), "done_wall": time.time()}

    def _apply_node_action(self, f: str, nodes: list[str]) -> None:
        db = self.db
        for n in nodes:
            if f == "kill":
                db.kill(n)
            elif f == "pause":
                db.pause(n)
            elif f == "resume":
                db.resume(n)
            else:  # restart: a running node is killed first
                if db.running(n):
                    db.kill(n)
                deadline = time.monotonic() + 5
                while db.running(n) and time.monotonic() < deadline:
                    time.sleep(0.02)
                db.start(n)

    async def _do_partition(self, step: Step) -> dict:
        await self._mark_epochs()
        a = step.args
        hosts = [CONTROLLER, *self.db.brokers]
        g = grudges.complete(hosts)
        edges = []  # (from, to): packets from `from` no longer reach `to`
        for node, sources in a.grudge.items():
            n = await self._resolve(node)
            edges += [(await self._resolve(s), n) for s in sources]
        for x, y in a.cut:
            x, y = await self._resolve(x), await self._resolve(y)
            edges += [(x, y), (y, x)]
        for ow in a.one_way:
            edges.append((await self._resolve(ow["from"]), await self._resolve(ow["to"])))
        for x in a.isolate:
            x = await self._resolve(x)
            edges += [(x, h) for h in hosts if h != x] + [(h, x) for h in hosts if h != x]
        for src, dst in edges:
            if src == dst:
                raise StepError(f"{step.label()}: cannot cut {src} from itself")
            if g.has_edge(src, dst):
                g.remove_edge(src, dst)
        grudge = await asyncio.to_thread(self.network.apply, g)
        self.history.nemesis("partition", {"kind": "scripted", "grudge": grudge})
        return {"grudge": grudge, "done": self.history.now(), "done_wall": time.time()}

    async def _do_heal(self, step: Step) -> dict:
        await self._mark_epochs()
        await asyncio.to_thread(self.network.heal)
        self.history.nemesis("heal", None)
        return {"done": self.history.now(), "done_wall": time.time()}

    async def _do_sleep(self, step: Step) -> dict:
        await asyncio.sleep(step.args)
        return {}

    async def _do_wait(self, step: Step) -> dict:
        a = step.args
        cond: conditions.Condition = step.parsed
        started = self.history.now()
        if not self.epoch_baseline:
            await self._mark_epochs()
        if not self.epoch_baseline:
            meta = await self._metadata() or {}
            self.epoch_baseline = {k: v.get("leader_epoch") for k, v in meta.items()}
        deadline = time.monotonic() + a.timeout
        seen = "nothing observed"
        while True:
            obs = await self._observe(cond)
            holds, seen = conditions.evaluate(cond, obs)
            if holds:
                break
            if time.monotonic() >= deadline:
                raise StepError(f"{step.label()}: timed out after {a.timeout:g} s waiting until "
                                f"`{cond.text}`; last seen: {seen}")
            await asyncio.sleep(OBSERVE_PERIOD)
        held = self.history.now()
        out = {"until": cond.text, "seen": seen, "waited_ms": round((held - started) / 1e6, 1), "done": held}
        if a.measure is not None:
            m = a.measure
            since, since_wall = self._step_done[m.since]
            ms = round((held - since) / 1e6, 1)
            bound = bound_ms(m.max_ms, self.scenario.settings, self.spec.era)
            meas = {"name": m.name, "since": m.since, "ms": ms, "polled_ms": ms, "bound_ms": bound,
                    "within": None if bound is None else ms <= bound, "observed": seen,
                    "poll_period_ms": OBSERVE_PERIOD * 1000, "event": m.event, "since_wall": since_wall,
                    "source": "polling"}
            self.measurements.append(meas)
            self.progress.message(f"measured {m.name}: {ms:g} ms since {m.since}"
                                  + ("" if bound is None else f" (bound {bound:g} ms)"))
            out["measure"] = meas
        return out

    # ------------------------------------------------------------------ verdict
    def _check(self) -> int:
        self.progress.message("checking")
        if self.step_error is None and self.spec.check:
            try:
                checked = results.check_store(self.store)
            except Exception as e:  # a checker crash is an unknown verdict, not a pass
                checked = {"valid": "unknown", "error": f"checker failed: {type(e).__name__}: {e}"}
        else:
            checked = {"valid": "unknown", "error": self.step_error or "checkers skipped (--no-check)"}
        record = {"aliases": self.aliases, "steps": self.step_log, "measurements": self.measurements,
                  "writes": self.writes, "final": self.final, "error": self.step_error,
                  "duration_s": round(time.monotonic() - self._started, 1)}
        self.results = results.analyze(self.store, self.scenario, self.spec.era, checked, record)
        write_json(self.store / "results.json", self.results)
        # `harness check` rewrites results.json from the checkers alone; this copy keeps the scenario's part
        write_json(self.store / "scenario-results.json", {"valid": self.results["valid"],
                                                          "scenario": self.results["scenario"]})
        self.progress.message("verdict: " + verdict.summary(self.results))
        sc = self.results["scenario"]
        if sc.get("expected") is not None:
            self.progress.message(f"expected {sc['expected']}: {'met' if sc['as_expected'] else 'NOT met'}")
        self._report()
        self.progress.message(f"store {self.store}")
        return verdict.exit_code(self.results)


def _describe(step: Step) -> str:
    a = step.args
    if step.action == "wait":
        return f"until {a.until} (timeout {a.timeout:g} s)"
    if step.action == "write":
        return f"{a.count} x key {a.key}" + (f" acks={a.acks}" if a.acks else "")
    if step.action == "partition":
        return json.dumps(a.model_dump(by_alias=True, exclude_defaults=True))
    if step.action in NODE_ACTIONS:
        return ", ".join(a) + (f" as {step.bind_as}" if step.bind_as else "")
    return "" if a is None else json.dumps(a)


def _step_json(step: Step) -> dict:
    args = step.args.model_dump(by_alias=True, exclude_defaults=True) if hasattr(step.args, "model_dump") \
        else step.args
    return {"index": step.index, "action": step.action, "args": args, "id": step.id, "as": step.bind_as,
            "eras": step.eras}

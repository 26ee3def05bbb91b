"""One test run: spec -> cluster -> replicas -> workload + nemesis -> history
-> collect -> check -> exit code.

Teardown is unconditional: Ctrl-C, SIGTERM or an error tear down every
process, namespace and rule (recorded in the run record first, so that even a
SIGKILLed harness can be cleaned up by `harness cleanup`).
"""
from __future__ import annotations

import asyncio
import importlib
import json
import os
import secrets
import signal
import threading
import time
from pathlib import Path

from harness import verdict
from harness.cleanup import RunRecord, release
from harness.cluster.base import CONTROLLER, ClusterError
from harness.db import ReplicaDb
from harness.history import HistoryWriter
from harness.progress import Progress
from harness.spec import TestSpec
from harness.store import create_run_dir, link_latest, write_json

REPO_DIR = Path(__file__).resolve().parent.parent
WORK_ROOT = Path(os.environ.get("HARNESS_WORK_ROOT", "/var/tmp/harness"))


class RunError(RuntimeError):
    """The run could not proceed (exit 2); the message is one line."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM: tear down and exit 2."""


def preflight(spec: TestSpec) -> None:
    """Checks that must pass before anything is created."""
    if spec.backend == "netns" and os.geteuid() != 0:
        raise RunError("the netns backend needs root (network namespaces, veths, iptables): run as root")
    if not (REPO_DIR / "replica").is_dir():
        raise RunError(f"no replica/ package under {REPO_DIR}; run from a full checkout")
    try:  # replica settings are checked by the replica's own rules
        from replica.config import ConfigError, build
        try:
            build(spec.era, spec.settings)
        except ConfigError as e:
            raise RunError(f"--set: {e}") from None
    except ImportError:
        pass
    if spec.backend == "netns":
        from harness.cluster.netns import host_addresses
        try:
            host_addresses(spec.subnet, spec.nodes)
        except ClusterError as e:
            raise RunError(str(e)) from None


def make_cluster(spec: TestSpec, run_id: str, record: RunRecord, work_dir: str):
    """Backends: netns here; docker and ssh expose make_cluster(spec, run_id, record, work_dir)."""
    if spec.backend == "netns":
        from harness.cluster.netns import NetnsCluster
        return NetnsCluster(run_id, spec.nodes, spec.subnet, record, work_dir)
    try:
        mod = importlib.import_module(f"harness.cluster.{spec.backend}")
        factory = mod.make_cluster
    except (ImportError, AttributeError) as e:
        raise RunError(f"backend {spec.backend!r} is not available ({e}); use --backend netns") from None
    return factory(spec, run_id, record, work_dir)


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
    def __init__(self, spec: TestSpec, progress: Progress | None = None):
        self.spec = spec
        self.run_id = secrets.token_hex(3)
        self.store: Path | None = None
        self.progress = progress
        self.history: HistoryWriter | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.main_task: asyncio.Task | None = None
        self.outcome: dict = {}

    # ------------------------------------------------------------------
    def execute(self) -> int:
        spec = self.spec
        preflight(spec)
        self.store = create_run_dir(spec.store_root, spec.name).resolve()
        write_json(self.store / "test.json", {**spec.model_dump(), "run_id": self.run_id,
                                              "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        log = open(self.store / "harness.log", "a", encoding="utf-8")
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
            cluster = make_cluster(spec, self.run_id, record, str(WORK_ROOT / self.run_id))
            self._run_cluster(cluster)
        except Interrupted as e:
            interrupted = str(e)
        except (ClusterError, RunError) as e:
            error = str(e)
        except Exception as e:  # a bug or an unexpected failure: still exit 2, never 1
            error = f"{type(e).__name__}: {e}"
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.progress.message("tearing down")
                if cluster is not None:
                    cluster.destroy()
                release(record)  # whatever a failed backend constructor recorded
                record.remove_file()
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
                if self.history:
                    self.history.close()
        if interrupted or error:
            msg = f"interrupted by {interrupted}" if interrupted else error
            hist = self.store / "history.jsonl"
            if hist.exists() and hist.stat().st_size > 0:
                msg += f"; the partial history is checkable: harness check {self.store}"
            self.progress.message(f"run aborted: {msg}")
            link_latest(self.store)
            log.close()
            return 2
        rc = self._check()
        link_latest(self.store)
        log.close()
        return rc

    def _check(self) -> int:
        if not self.spec.check:
            return 2
        self.progress.message("checking")
        try:
            results = verdict.check_store(self.store)
        except Exception as e:  # a checker crash is an unknown verdict, not a pass
            results = {"valid": "unknown", "error": f"checker failed: {type(e).__name__}: {e}"}
            write_json(self.store / "results.json", results)
        self.progress.message("verdict: " + verdict.summary(results))
        self._report()
        self.progress.message(f"store {self.store}")
        return verdict.exit_code(results)

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
        progress.message(f"creating {spec.backend} cluster {self.run_id}: ctl + {spec.nodes} brokers")
        cluster.create()
        cluster.install_code(str(REPO_DIR))
        db = ReplicaDb(cluster, spec.era, spec.nodes, dict(spec.settings))
        progress.message(f"starting replicas (era {spec.era})")
        db.start_all()
        self.history = HistoryWriter(str(self.store / "history.jsonl"))
        test = json.loads((self.store / "test.json").read_text())
        write_json(self.store / "test.json", {**test, "t0_wall": self.history.t0_wall})
        result: dict = {}
        thread = threading.Thread(target=self._client_thread, args=(cluster, db, result), name="clients")
        thread.start()
        try:
            while thread.is_alive():
                thread.join(0.2)
        except Interrupted:
            if self.loop is not None and self.main_task is not None:
                self.loop.call_soon_threadsafe(self.main_task.cancel)
            thread.join(15)
            raise
        if "error" in result:
            raise RunError(result["error"].removeprefix("RuntimeError: "))
        progress.message("stopping replicas, collecting logs and dumps")
        db.stop_all()
        db.collect(self.store, result.get("dumps", {}))
        self.outcome = result

    def _client_thread(self, cluster, db, result: dict) -> None:
        try:
            cluster.enter_client_network()
            self.loop = asyncio.new_event_loop()
            self.loop.set_exception_handler(self._loop_exception)
            self.main_task = self.loop.create_task(self._drive(cluster, db, result))
            self.loop.run_until_complete(self.main_task)
        except asyncio.CancelledError:
            result["error"] = "cancelled"
        except BaseException as e:  # reported by the main thread
            result["error"] = f"{type(e).__name__}: {e}"
        finally:
            if self.loop is not None:
                _drain(self.loop)
                self.loop.close()

    def _loop_exception(self, loop, context: dict) -> None:
        """Stray task errors of the client library go to harness.log only."""
        exc = context.get("exception")
        text = f"{type(exc).__name__}: {exc}" if exc else context.get("message", "")
        self.progress.message_to_log(f"asyncio: {text}")

    async def _drive(self, cluster, db: ReplicaDb, result: dict) -> None:
        from nemesis import faults as nf
        from nemesis.schedule import Schedule
        from workloads.log import LogWorkload, Sampler, WorkloadConfig, collect_dumps

        spec, progress, history = self.spec, self.progress, self.history
        topic_config = {k: v for k, v in spec.settings.items() if k in ("min.insync.replicas", "unclean.leader.election.enable")}
        cfg = WorkloadConfig(keys=spec.keys, concurrency=spec.concurrency, rate=spec.rate,
                             send_fraction=spec.send_fraction, acks=spec.acks,
                             replication_factor=spec.replication_factor, topic_config=topic_config,
                             seed=spec.seed)
        bootstrap = db.bootstrap() + [db.address(CONTROLLER)]
        wl = LogWorkload(cfg, bootstrap, history, log=progress.message)
        progress.message(f"creating topic log ({spec.keys} partitions, rf {spec.replication_factor})")
        await wl.setup(dead=lambda: self._dead_replica(db))
        brokers = {n: db.broker_id(n) for n in db.brokers}
        sampler = Sampler(str(self.store / "samples.jsonl"), brokers, bootstrap, history)
        network = nf.Network(cluster.remotes)
        schedule = Schedule(nf.build(spec.nemesis, db, network, spec.nemesis_interval), spec.seed, spec.nemesis_interval, history,
                            leader=wl.leader_node, log=progress.message)
        progress.message(f"workload: {spec.time_limit:g}s, {spec.concurrency} clients, "
                         f"{spec.rate:g} ops/s, nemesis {','.join(spec.nemesis) or 'none'} (seed {spec.seed})")
        sampler_task = asyncio.create_task(sampler.run())
        start = time.monotonic()
        deadline = start + spec.time_limit
        progress.start_run(spec.time_limit)

        async def ticker():
            while True:
                progress.update(time.monotonic() - start, history.counts)
                await asyncio.sleep(1)

        tick = asyncio.create_task(ticker())
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(wl.run(deadline))
                tg.create_task(schedule.run(deadline))
        finally:
            tick.cancel()
            progress.end_run()
        progress.message("final phase: healing every fault")
        healed = await asyncio.to_thread(self._heal_all, db, network)
        history.nemesis("final", healed)
        final = await wl.final_reads(spec.recovery_timeout)
        progress.message(f"final reads: {final}")
        sampler_task.cancel()
        await asyncio.gather(sampler_task, return_exceptions=True)
        result["dumps"] = await collect_dumps(bootstrap, brokers)
        result["final"] = final
        result["samples"] = sampler.count

    def _dead_replica(self, db: ReplicaDb) -> str | None:
        for node in [CONTROLLER, *db.brokers]:
            if not db.running(node):
                tail = _last_line(db.cluster.remotes[node].run(["tail", "-n", "5", db.log_path(node)], check=False).stdout)
                return f"the replica on {node} exited at startup: {tail}"
        return None

    @staticmethod
    def _heal_all(db: ReplicaDb, network) -> dict:
        network.heal()
        restarted = []
        for n in db.brokers + [CONTROLLER]:
            db.resume(n)
            if not db.running(n):
                db.start(n)
                restarted.append(n)
        return {"healed": True, "restarted": restarted}


def _last_line(text: str) -> str:
    """Last non-empty line of a log tail, for one-line errors."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:300] if lines else "(empty log)"

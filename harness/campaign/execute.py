"""`harness campaign run`: plan (or resume), run every missing run with up to
N at once, check them all in one Spark job, write the page and JUnit.

Exit codes: 0 every cell as expected, 1 some cell not as expected (or left
unrun by the budget or a stop), 2 the campaign could not run (bad file, no
root, interrupted, the Spark job failed).

The loop runs in the main thread (children ask for SIGTERM when their parent
thread dies, so they must be started from the thread that lives as long as
the campaign) and polls its children twice a second.
"""
from __future__ import annotations

import hashlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from harness.campaign import launch
from harness.campaign.check import ENGINES, CheckError, check_stores, choose_engine
from harness.campaign.folder import (CampaignFolder, latest_unfinished, mark_partial, run_store)
from harness.campaign.matrix import expand
from harness.campaign.outcome import outcome
from harness.campaign.progress import CampaignProgress
from harness import registry
from harness.campaign.spec import (CampaignError, CampaignFile, load_campaign, parse_duration, profile_fields,
                                   profile_runs_in, system_variants)
from harness.campaign.verdicts import run_verdict
from harness.run_store import has_results

POLL_S = 0.5
ORPHAN_WAIT_S = 120  # a cut-off run of a killed campaign tears down within this


class Interrupted(Exception):
    pass


@dataclass
class Options:
    store_root: str = "store"
    resume: bool = False
    parallel: int = 1
    budget: str | None = None
    runs_per_cell: int | None = None
    stop_on_first_invalid: bool = False
    junit: str | None = None
    master: str | None = None
    subnets: str | None = None      # overrides the file's pool of /24s for parallel netns runs
    engine: str = "auto"            # the final check: one Spark job, "local" (in-process), or "auto" by size


def file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def preflight(campaign: CampaignFile, file: str, opts: Options) -> None:
    """Everything that can be refused before the first run starts."""
    if opts.engine not in ENGINES:
        raise CampaignError(f"--engine {opts.engine!r}: use {', '.join(ENGINES)}")
    if opts.parallel < 1:
        raise CampaignError(f"--parallel {opts.parallel}: give 1 or more")
    if opts.parallel > 1 and "ssh" in campaign.backends:
        raise CampaignError(f"--parallel {opts.parallel}: runs on the ssh backend share the same hosts; "
                            f"use --parallel 1 (netns and docker runs coexist)")
    if opts.budget is not None:
        try:
            parse_duration(opts.budget)
        except ValueError as e:
            raise CampaignError(f"--budget: {e}") from None
    if "netns" in campaign.backends and os.geteuid() != 0:
        raise CampaignError("the netns backend needs root (network namespaces, veths, iptables): run as root")
    from harness.spec import SpecError, build_spec
    pairs = [(s, v) for s in campaign.systems for v in system_variants(campaign, registry.system(s))]
    # every variant and workload with the file's options and settings makes a valid run spec
    for (system_name, variant), workload, profile in [(pair, w, p) for pair in pairs for w in campaign.workloads
                                                       for p in list(campaign.profiles) or [None]
                                                       if profile_runs_in(campaign, p, pair[1])]:
        try:
            spec = build_spec(None, system=system_name, variant=variant, workload=workload,
                              **profile_fields(campaign, profile))
            system = spec.system_def()
            if system.check_settings is not None:  # the system's own setting names and types
                system.check_settings({**campaign.settings}, spec.options())
        except (SpecError, ValueError) as e:
            where = f"'profiles.{profile}'" if profile else "'options'"
            raise CampaignError(f"campaign file {file}: field {where}/'settings' with system {system_name} "
                                f"variant {variant}: {e}") from None
    for faults in campaign.nemesis:
        try:   # with the first system and variant: system_options are that system's own
            system_name, variant = pairs[0] if pairs else (None, None)
            build_spec(None, nemesis=faults, **({"system": system_name, "variant": variant} if system_name else {}),
                       workload=campaign.workloads[0], **campaign.options)
        except SpecError as e:
            raise CampaignError(f"campaign file {file}: field 'nemesis' {faults}: `harness run` refuses it ({e})") from None


def plan_folder(campaign: CampaignFile, file: str, opts: Options) -> tuple[CampaignFolder, bool]:
    """(folder, resumed): a new campaign with its plan, or the unfinished one to resume."""
    if opts.resume:
        folder = latest_unfinished(opts.store_root, campaign.name)
        if folder is None:
            raise CampaignError(f"--resume: no unfinished campaign {campaign.name!r} under "
                                f"{Path(opts.store_root) / 'campaigns'}; run without --resume to start one")
        if folder.plan.get("sha256") != file_digest(file):
            raise CampaignError(f"--resume: {file} changed since {folder.path} was planned; "
                                f"start a new campaign without --resume")
        return folder, True
    salt = f"{campaign.name}/{time.time_ns()}"
    try:
        cells = expand(campaign, salt, opts.runs_per_cell)
    except ValueError as e:
        raise CampaignError(f"campaign file {file}: {e}") from None
    plan = {"name": campaign.name, "description": campaign.description, "file": str(Path(file).resolve()),
            "sha256": file_digest(file), "campaign": campaign.model_dump(mode="json"),
            "options": {"parallel": opts.parallel, "budget": opts.budget or campaign.budget,
                        "runs_per_cell": opts.runs_per_cell, "stop_on_first_invalid": opts.stop_on_first_invalid},
            "cells": [c.as_json() for c in cells]}
    return CampaignFolder.create(opts.store_root, campaign.name, file, plan), False


def recover(folder: CampaignFolder, log) -> None:
    """Runs a killed campaign left in flight: wait for them to go, then keep or mark them."""
    for run_id, st in folder.run_states().items():
        att = st.open_attempt
        if att is None:
            continue
        deadline = time.monotonic() + ORPHAN_WAIT_S
        while launch.pid_alive(att["pid"], att.get("ticks")) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if launch.pid_alive(att["pid"], att.get("ticks")):
            os.kill(att["pid"], signal.SIGKILL)
        attempt_dir = folder.attempt_dir(run_id, att["attempt"])
        store = run_store(attempt_dir)
        if store is not None and has_results(store):  # it finished on its own
            folder.append({"event": "run-end", "run": run_id, "attempt": att["attempt"], "exit": None,
                           "complete": True, "recovered": True, "store": str(store.relative_to(folder.path)),
                           "seconds": None})
            log(f"recovered {run_id} (finished while the campaign was down)")
        else:
            mark_partial(attempt_dir, "cut off when the campaign stopped; the run is started again")
            folder.append({"event": "run-partial", "run": run_id, "attempt": att["attempt"]})
            log(f"partial {run_id} attempt {att['attempt']}: kept and marked, will run again")


class Scheduler:
    """Up to `parallel` runs at once, in plan order, within the budget."""

    def __init__(self, folder: CampaignFolder, campaign: CampaignFile, opts: Options):
        self.folder, self.campaign, self.opts = folder, campaign, opts
        budget = opts.budget or campaign.budget
        self.deadline = time.monotonic() + parse_duration(budget) if budget else None
        states = folder.run_states()
        self.cells = {c["id"]: c for c in folder.cells()}
        self.queue = [(cell, run) for cell, run in folder.planned_runs() if not states[run["id"]].done]
        self.next_attempt = {rid: len(st.attempts) + 1 for rid, st in states.items()}
        self.children: dict[int, launch.Child] = {}   # slot -> child
        self.stopped: str | None = None
        left = {c["id"]: sum(1 for r in c["runs"] if not states[r["id"]].done) for c in folder.cells()}
        self.progress = CampaignProgress(len(states), len(states) - len(self.queue), opts.parallel, cells_left=left)

    def _expected_run_s(self) -> float:
        d = self.progress.durations
        return sum(d) / len(d) if d else self.campaign.time_limit * 1.5 + 30

    def _free_slot(self) -> int | None:
        for slot in range(self.opts.parallel):
            if slot not in self.children:
                return slot
        return None

    def _start(self, slot: int, cell: dict, run: dict) -> None:
        rid = run["id"]
        attempt = self.next_attempt[rid]
        self.next_attempt[rid] += 1
        attempt_dir = self.folder.attempt_dir(rid, attempt)
        attempt_dir.mkdir(parents=True, exist_ok=True)
        subnet = launch.slot_subnet(self.campaign.subnets, slot)
        argv = launch.run_argv(self.campaign, cell, run, attempt_dir, subnet)
        child = launch.start(rid, attempt, slot, argv, attempt_dir, time.monotonic())
        self.folder.append({"event": "run-start", "run": rid, "attempt": attempt, "pid": child.proc.pid,
                            "ticks": launch.start_ticks(child.proc.pid), "slot": slot, "subnet": subnet,
                            "argv": argv[3:]})
        self.children[slot] = child
        self.progress.run_started(rid, attempt)

    def _finish(self, slot: int, child: launch.Child, code: int) -> None:
        del self.children[slot]
        seconds = round(time.monotonic() - child.started, 1)
        store = run_store(child.attempt_dir)
        cell = self.cells[child.run_id.rsplit("/", 1)[0]]
        v = run_verdict(store, cell["kind"] == "scenario", cell.get("checkers"))
        self.folder.append({"event": "run-end", "run": child.run_id, "attempt": child.attempt, "exit": code,
                            "complete": store is not None and has_results(store),
                            "store": str(store.relative_to(self.folder.path)) if store else None,
                            "verdict": v["verdict"], "seconds": seconds})
        self.progress.run_ended(child.run_id, v["verdict"], seconds)
        unexpected = (cell["expect"] == "valid" and v["verdict"] == "invalid") or \
            (cell["expect"] == "scenario" and v.get("as_expected") is False)
        if self.opts.stop_on_first_invalid and unexpected:
            self.stop(f"stop on first invalid: {child.run_id}")

    def stop(self, why: str) -> None:
        if self.stopped is None:
            self.stopped = why
            self.folder.append({"event": "stop", "why": why, "left": [r["id"] for _c, r in self.queue]})
            self.progress.message(f"{why}; {len(self.queue)} runs not started")

    def interrupt(self) -> None:
        """Ctrl-C / SIGTERM: stop every run (they tear down), mark them partial."""
        for child in self.children.values():
            child.terminate()
        for slot, child in list(self.children.items()):
            try:
                child.proc.wait(ORPHAN_WAIT_S)
            except Exception:
                child.proc.kill()
            mark_partial(child.attempt_dir, "interrupted; the run is started again on --resume")
            self.folder.append({"event": "run-partial", "run": child.run_id, "attempt": child.attempt})
            del self.children[slot]

    def run(self) -> None:
        while self.queue or self.children:
            for slot, child in list(self.children.items()):
                code = child.proc.poll()
                if code is not None:
                    self._finish(slot, child, code)
            if self.stopped is None and self.queue and self.deadline is not None \
                    and time.monotonic() + self._expected_run_s() > self.deadline:
                self.stop("budget spent")
            if self.stopped is not None:
                self.queue.clear()
            while self.queue and (slot := self._free_slot()) is not None:
                cell, run = self.queue.pop(0)
                self._start(slot, cell, run)
            if self.children:
                time.sleep(POLL_S)
        self.progress.close()


def _raise_interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def run_campaign(file: str, opts: Options) -> int:
    """The whole campaign; CampaignError for bad input (exit 2, nothing started)."""
    campaign = load_campaign(file)
    if opts.subnets:
        try:
            campaign = campaign.model_validate({**campaign.model_dump(), "subnets": opts.subnets})
        except ValueError as e:
            raise CampaignError(f"--subnets {opts.subnets}: {str(e).splitlines()[-1].strip()}") from None
    preflight(campaign, file, opts)
    folder, resumed = plan_folder(campaign, file, opts)
    sched = None
    old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if resumed:
            folder.append({"event": "resume", "pid": os.getpid()})
            recover(folder, lambda m: print(f"campaign: {m}", flush=True))
        sched = Scheduler(folder, campaign, opts)
        sched.progress.message(f"campaign {folder.path} ({'resumed, ' if resumed else ''}"
                               f"{len(sched.queue)} of {sched.progress.total} runs to go)")
        sched.run()
    except Interrupted as e:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if sched is not None:
            sched.progress.close()
            sched.interrupt()
        folder.append({"event": "interrupted", "signal": str(e)})
        print(f"harness: error: campaign interrupted by {e}; continue it with "
              f"`harness campaign run {file} --resume --store {opts.store_root}`", flush=True)
        return 2
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return finish(folder, opts, stopped=sched.stopped if sched else None)


def finish(folder: CampaignFolder, opts: Options, stopped: str | None = None) -> int:
    """The final check (Spark or in-process), summary, page, JUnit; -> the exit code."""
    from harness import junit
    from reports.campaign import build_campaign_page, build_campaigns_index

    notes = [stopped] if stopped else []
    stores = [folder.path / st.end["store"] for st in folder.run_states().values()
              if st.done and st.end.get("store") and has_results(folder.path / st.end["store"])]
    check_failed = None
    try:
        chosen = choose_engine(stores, opts.engine, opts.master)
        check_stores(stores, master=opts.master, log=lambda m: print(f"campaign: {m}", flush=True),
                     chosen=chosen)
        folder.append({"event": "checked", "runs": len(stores), "engine": chosen[0]})
    except CheckError as e:
        check_failed = str(e)
        notes.append(check_failed)
    summary = outcome(folder, notes)
    if check_failed:
        summary["exit_code"] = 2
    folder.write_summary(summary)
    page = build_campaign_page(folder.path, summary)
    build_campaigns_index(folder.path.parents[1])
    cases = junit.campaign_cases(folder.path, summary)
    junit.write(folder.path / "junit.xml", f"campaign {folder.name} {folder.stamp}", cases)
    if opts.junit:
        junit.write(Path(opts.junit), f"campaign {folder.name} {folder.stamp}", cases)
    folder.append({"event": "finished", "exit": summary["exit_code"]})
    t = summary["totals"]
    print(f"campaign: {t['as_expected']}/{t['cells']} cells as expected, runs {t['runs']} "
          f"(valid {t['valid']}, invalid {t['invalid']}, unknown {t['unknown']}); "
          f"new failures {len(summary['comparison']['new_failures'])}, fixed {len(summary['comparison']['fixed'])}",
          flush=True)
    if check_failed:
        print(f"harness: error: {check_failed}", flush=True)
    print(page, flush=True)
    return summary["exit_code"]

"""Start one run of a campaign as a subprocess of the harness CLI.

A subprocess, not a call in this process: a run that hangs or crashes
cannot take the campaign with it, several run at once without sharing
signal handlers or the event loop, and a kill of the campaign reaches them
cleanly. Each child is in its own session (a Ctrl-C on the terminal goes to
the campaign, which stops the runs in order) and asks the kernel for SIGTERM
when the campaign dies (PR_SET_PDEATHSIG), so a SIGKILLed campaign leaves no
run going on: the runs tear down as after Ctrl-C and are run again on
--resume.
"""
from __future__ import annotations

import ctypes
import ipaddress
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.campaign.matrix import variant_of
from harness.campaign.spec import CampaignFile, profile_fields

PR_SET_PDEATHSIG = 1
REPO_DIR = Path(__file__).resolve().parents[2]
RUN_LOG = "campaign-run.log"
RUN_JUNIT = "junit.xml"  # each run's own JUnit file (`--junit` of harness run / scenario)


def slot_subnet(pool: str, slot: int) -> str:
    """The /24 of the pool that parallel slot `slot` uses (slots never share one)."""
    net = ipaddress.ip_network(pool, strict=False)
    subnets = list(net.subnets(new_prefix=24)) if net.prefixlen < 24 else [net]
    return str(subnets[slot % len(subnets)])


def run_spec(campaign: CampaignFile, cell: dict, run: dict, subnet: str | None) -> dict:
    """The `harness run --spec` document of one random run."""
    spec = {**profile_fields(campaign, cell.get("profile")), "system": cell["system"], "variant": variant_of(cell),
            "nemesis": cell["nemesis"], "seed": run["seed"],
            "time_limit": campaign.time_limit, "backend": cell["backend"],
            "settings": dict(campaign.settings), "backend_options": dict(campaign.backend_options)}
    if spec["variant"] is None:
        spec.pop("variant")
    if campaign.nemesis_interval is not None:
        spec["nemesis_interval"] = campaign.nemesis_interval
    if subnet and cell["backend"] == "netns":
        spec["subnet"] = subnet
    if cell.get("workload") not in (None, "log"):
        spec["workload"] = cell["workload"]
    return spec


def run_argv(campaign: CampaignFile, cell: dict, run: dict, attempt_dir: Path, subnet: str | None) -> list[str]:
    """The command line of one run; random runs get their spec as a file next to the attempt."""
    base = [sys.executable, "-m", "harness"]
    if cell["kind"] == "scenario":
        argv = base + ["scenario", cell["scenario"], "--variant", variant_of(cell), "--backend", cell["backend"],
                       "--store", str(attempt_dir), "--junit", str(attempt_dir / RUN_JUNIT)]
        if subnet and cell["backend"] == "netns":
            argv += ["--subnet", subnet]
        return argv
    spec_file = attempt_dir.parent / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(run_spec(campaign, cell, run, subnet), sort_keys=False))
    return base + ["run", "--spec", str(spec_file), "--store", str(attempt_dir), "--junit", str(attempt_dir / RUN_JUNIT)]


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the campaign process dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


@dataclass
class Child:
    run_id: str
    attempt: int
    slot: int
    proc: subprocess.Popen
    started: float
    attempt_dir: Path

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)


def start(run_id: str, attempt: int, slot: int, argv: list[str], attempt_dir: Path, started: float) -> Child:
    attempt_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CI="true", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), env.get("PYTHONPATH")) if p)
    log = open(attempt_dir / RUN_LOG, "ab")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(REPO_DIR), env=env, start_new_session=True,
                                preexec_fn=_die_with_parent)
    finally:
        log.close()
    return Child(run_id, attempt, slot, proc, started, attempt_dir)


def pid_alive(pid: int, start_ticks: int | None) -> bool:
    """Is this pid still the process we started (not a reused pid)?"""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    if fields[0] == "Z":
        return False
    return start_ticks is None or int(fields[19]) == start_ticks


def start_ticks(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None

"""A fault the backend or the system cannot do is refused before any host
exists: one line naming the fault, the host and the fix, exit 2 (no FUSE
device, no libfaketime, clock on NATS). The machine's lack of FUSE or
libfaketime is made real in a private mount namespace (unshare -m), where
/dev/null is bound over the device or the library."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nemesis.clock import LIBS

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (unshare -m, netns backend)")


def harness(tmp_path, *args: str, hide: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), HARNESS_RUN_DIR=str(tmp_path / "runs"),
               HARNESS_WORK_ROOT=str(tmp_path / "work"))
    argv = [sys.executable, "-m", "harness", "run", "--time-limit", "5", "--store", str(tmp_path / "store"),
            "--subnet", "10.222.30.0/24", *args]
    if hide:
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                f"mount --bind /dev/null {hide} && exec \"$@\"", "sh", *argv]
    return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def one_line_refusal(out: subprocess.CompletedProcess, *words: str) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def nothing_created(tmp_path) -> None:
    assert not list((tmp_path / "runs").glob("*.json")) if (tmp_path / "runs").exists() else True
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())


@needs_root
def test_power_without_a_fuse_device_is_refused_before_any_host(tmp_path):
    out = harness(tmp_path, "--nemesis", "kill,power", hide="/dev/fuse")
    one_line_refusal(out, "fault power", "this machine", "/dev/fuse", "apt-get install fuse3")
    nothing_created(tmp_path)


@needs_root
def test_clock_without_libfaketime_is_refused_before_any_host(tmp_path):
    lib = next(p for p in LIBS if os.path.exists(p))
    out = harness(tmp_path, "--nemesis", "clock", hide=lib)
    one_line_refusal(out, "fault clock", "this machine", "apt-get install libfaketime")
    nothing_created(tmp_path)


def test_clock_on_nats_is_refused_before_any_host(tmp_path):
    out = harness(tmp_path, "--system", "nats", "--nemesis", "clock")
    one_line_refusal(out, "nats", "clock")
    nothing_created(tmp_path)


@needs_root
def test_remote_store_without_tiered_storage_is_refused_before_any_host(tmp_path):
    line = one_line_refusal(harness(tmp_path, "--nemesis", "remote-store"), "remote-store", "tiered storage",
                            "remote.storage.enable=true")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), line

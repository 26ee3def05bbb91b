"""The CLI's help comes from the registries (issue 39): `--nemesis` lists every registered fault,
`--sut` every system, `--workload` every workload, `--backend` every backend; and `run` and
`scenario` share one definition of their common options (same names, same help)."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from harness import registry

pytestmark = pytest.mark.unit

SHARED = ("system", "variant", "option", "backend", "subnet", "store_root", "hosts", "ssh_user", "ssh_key",
          "known_hosts", "json_out", "junit")


@functools.cache
def commands():
    from harness.cli import app

    return typer.main.get_command(app).commands


def help_of(command: str, param: str) -> str:
    return next(p.help for p in commands()[command].params if p.name == param)


@functools.cache
def help_page(command: str) -> str:
    """`harness COMMAND --help` as shown, one line per option (the names are filled in
    when the page is shown: harness.cli.RegistryHelp)."""
    out = subprocess.run([sys.executable, "-m", "harness", command, "--help"], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parents[2],
                         env=dict(os.environ, TERMINAL_WIDTH="1000"), check=True)
    return out.stdout


def shown_help(command: str, param: str) -> str:
    flag = "--" + {"system": "sut"}.get(param, param).replace("_", "-")
    line, = [line for line in help_page(command).splitlines() if f" {flag} " in line or f" {flag}," in line]
    return line


@pytest.mark.parametrize("command, param, group", [
    ("run", "nemesis", registry.FAULTS), ("run", "system", registry.SYSTEMS), ("scenario", "system", registry.SYSTEMS),
    ("run", "workload", registry.WORKLOADS), ("run", "backend", registry.BACKENDS),
    ("scenario", "backend", registry.BACKENDS),
])
def test_help_lists_every_registered_name(command, param, group):
    text = shown_help(command, param)
    for name in registry.names(group):
        assert name in text, (command, param, name, text)


def test_help_loads_no_part():
    """The lists come from the registries' names (entry points and built-in tables): building the
    help imports no system, fault or workload module, so `harness --help` stays quick."""
    import subprocess
    import sys

    probe = ("import sys, harness.cli; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('systems', 'workloads', 'nemesis')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_run_and_scenario_share_their_common_options():
    run = {p.name: p for p in commands()["run"].params}
    scenario = {p.name: p for p in commands()["scenario"].params}
    for name in SHARED:
        a, b = run[name], scenario[name]
        assert (a.opts, a.secondary_opts, a.help, a.default, a.multiple) == \
               (b.opts, b.secondary_opts, b.help, b.default, b.multiple), name

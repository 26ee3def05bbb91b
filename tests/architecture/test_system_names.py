"""A system lives in its folder (issue 25, criteria 3 and 6).

- No module outside `systems/<name>/`, `replica/`, tests and docs names a
  registered system, in code (string literals that are not docstrings,
  identifiers, imports), except `harness.registry.DEFAULT_SYSTEM`.
- A checkout without `systems/kafka/` (and without the tests) still works:
  every module imports, the registry lists the other systems, every campaign
  file loads, a stored run is checked, `--compare` says in one line that no
  system offers it. So adding Kafka back is adding its folder.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import registry

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
GENERIC = ("harness", "nemesis", "workloads", "scenarios", "history", "checkers", "reports", "bench", "scripts")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def naming(name: str, text: str, *, word: bool) -> bool:
    """Whether text names the system: equal to its name, its package (systems.<name> or
    systems/<name>), or the lower-case name as a word (`--option` hints, `kafka: ...`).
    Prose names products capitalised ("Jepsen's Kafka checker"): allowed. The default
    system's name (`replica`) is also the domain's word for a copy of the log, so for it
    only the package counts here, and `system == "replica"` is found by _system_literals."""
    if re.search(rf"\bsystems[./]{re.escape(name)}\b", text):
        return True
    return word and (text == name or re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None)


SYSTEM_WORDS = ("system", "sut")


def _system_literals(node: ast.AST) -> list[str]:
    """String constants used as a system: compared with, passed as or defaulted for a
    name that says system (`spec.system == "x"`, `system="x"`, `.get("system", "x")`)."""
    def says_system(expr: ast.AST) -> bool:
        return any(w in ast.unparse(expr).lower() for w in SYSTEM_WORDS)

    def const(expr: ast.AST) -> list[str]:
        return [expr.value] if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else []

    out: list[str] = []
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(says_system(e) for e in sides if not const(e)):
            for e in sides:
                out += const(e)
                if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
                    out += [c for x in e.elts for c in const(x)]
    elif isinstance(node, ast.Call):
        out += [c for k in node.keywords if k.arg and any(w in k.arg for w in SYSTEM_WORDS) for c in const(k.value)]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "setdefault", "pop") and \
                len(node.args) == 2 and any(w in c for c in const(node.args[0]) for w in SYSTEM_WORDS):
            out += const(node.args[1])
    return out


def names_in_code(path: Path, systems: list[str]) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            texts = [node.value]
        elif isinstance(node, ast.Import):
            texts = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            texts = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Name):
            texts = node.id.lower().split("_")
        elif isinstance(node, ast.Attribute):
            texts = node.attr.lower().split("_")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            texts = node.name.lower().split("_")
        line = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{getattr(node, 'lineno', '?')}"
        for text in texts:
            for name in systems:
                if naming(name, text, word=name != registry.DEFAULT_SYSTEM):
                    found.append(f"{line}: {name}: {text[:80]!r}")
        for text in _system_literals(node):
            if text in systems:
                found.append(f"{line}: {text}: as a system")
    return found


def test_no_module_outside_its_folder_names_a_system():
    systems = registry.names(registry.SYSTEMS)
    assert {"kafka", "nats", registry.DEFAULT_SYSTEM} <= set(systems)
    found = [hit for pkg in GENERIC for path in sorted((REPO / pkg).rglob("*.py"))
             for hit in names_in_code(path, systems)]
    assert sorted(set(found)) == []
    # the one place that names the default: the registry's constant, which everything else reads
    registry_source = (REPO / "harness" / "registry.py").read_text()
    assert re.search(rf"^DEFAULT_SYSTEM = [\"']{registry.DEFAULT_SYSTEM}[\"']$", registry_source, re.M)


def test_the_scan_sees_what_it_must(tmp_path):
    """The scan can fail: each way of naming a system is found, prose and the domain's
    word `replica` are not."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""Jepsen\'s Kafka checker (prose: allowed)."""\n'
                      'from systems.kafka import compare\n'
                      'HINT = "nats: version=2.12.1"\n'
                      'if spec.system == "kafka":\n    pass\n'
                      'kafka_timeout = 1\n'
                      'X = "Kafka-style replicated log"\n'
                      'row = {"replica": "n1"}\n'
                      'run(system="replica")\n'
                      'if test.get("system", "replica") in ("replica", "nats"):\n    pass\n')
    named = sorted(h.split(": ", 1)[1] for h in names_in_code(sample, ["kafka", "nats", "replica"]))
    assert named == sorted(["kafka: 'systems.kafka'", "kafka: 'systems.kafka.compare'", "nats: 'nats: version=2.12.1'",
                            "kafka: 'kafka'", "kafka: as a system", "kafka: 'kafka'", "replica: as a system",
                            "replica: as a system", "replica: as a system", "nats: 'nats'",
                            "nats: as a system"]), named


def _checkout_without(tmp_path: Path, folder: str) -> Path:
    """A copy of the checkout's tracked files, without `folder` and the tests."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False).stdout
    listed = [f for f in files.decode().split("\0") if f] if files else []
    copy = tmp_path / "checkout"
    if listed:
        for rel in listed:
            if rel.startswith((folder + "/", "tests/")) or not (REPO / rel).is_file():
                continue
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, copy / rel)
    else:  # not a git checkout (an unpacked archive): the folders themselves
        shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".git", ".venv", "build", "store", "tests",
                                                                  "__pycache__"))
        shutil.rmtree(copy / folder)
    assert not (copy / folder).exists() and (copy / "harness").is_dir()
    return copy


def _harness(copy: Path, *args: str) -> subprocess.CompletedProcess:
    # `python -m` puts the working directory first on the path: the copy's modules are the ones run
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=copy, capture_output=True, text=True,
                          timeout=120)


def test_a_checkout_without_kafka_works_without_a_word_of_it(tmp_path):
    copy = _checkout_without(tmp_path, "systems/kafka")
    probe = (
        "import importlib, json, pkgutil, sys\n"
        "from pathlib import Path\n"
        "root = Path.cwd()\n"
        "assert sys.path[0] in ('', str(root)), sys.path[0]\n"
        "mods = []\n"
        f"for pkg in {GENERIC[:7] + ('systems',)!r}:\n"
        "    for p in sorted((root / pkg).rglob('*.py')):\n"
        "        parts = list(p.relative_to(root).with_suffix('').parts)\n"
        "        if parts[-1] == '__main__': continue\n"
        "        if parts[-1] == '__init__': parts.pop()\n"
        "        mods.append('.'.join(parts))\n"
        "for m in mods:\n"
        "    mod = importlib.import_module(m)\n"
        "    assert Path(mod.__file__).is_relative_to(root), (m, mod.__file__)\n"
        "from harness import registry\n"
        "from harness.campaign.spec import load_campaign\n"
        "from harness.campaign.matrix import expand\n"
        "systems = registry.names(registry.SYSTEMS)\n"
        "for s in systems: registry.system(s)\n"
        "cells = {}\n"
        "for path in sorted([*root.glob('campaigns/*.yaml'), *root.glob('systems/*/campaigns/*.yaml')]):\n"
        "    cells[str(path.relative_to(root))] = len(expand(load_campaign(path), 'salt'))\n"
        "print(json.dumps({'modules': len(mods), 'systems': systems, 'campaigns': cells}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=copy, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "kafka" not in seen["systems"] and registry.DEFAULT_SYSTEM in seen["systems"], seen
    assert seen["modules"] > 100 and seen["campaigns"] and all(seen["campaigns"].values()), seen

    listed = _harness(copy, "scenario", "--list")
    assert listed.returncode == 0, listed.stderr
    assert "hw-data-loss" in listed.stdout and not re.search(r"^\s*kafka-", listed.stdout, re.M), listed.stdout
    helps = _harness(copy, "run", "--help").stdout + _harness(copy, "scenario", "--help").stdout
    assert "kafka" not in helps.lower(), helps

    compare = _harness(copy, "scenario", "hw-data-loss", "--compare")
    assert compare.returncode == 2 and "no comparison" in compare.stderr and len(compare.stderr.splitlines()) == 1, \
        compare.stderr

    stored = REPO / "tests" / "data" / "stores" / "hw-kill-seed11"
    run = tmp_path / "store" / "hw-kill-seed11"
    shutil.copytree(stored, run)
    checked = _harness(copy, "check", str(run))
    before = json.loads((stored / "results.json").read_text())
    after = json.loads((run / "results.json").read_text())
    assert checked.returncode == {True: 0, False: 1}.get(after["valid"], 2), checked.stderr[-2000:]
    assert after["valid"] == before["valid"] is False
    assert set(after["checkers"]) >= {"log", "replica-diff", "linearizability"}

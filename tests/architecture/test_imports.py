"""The import graph of the harness, from the source (ast, every import
statement, also those inside functions): nothing outside the replica's
adapter imports `replica`, there is no cycle, and no module imports one of a
higher layer than its own (the layers are the table in docs/extending.md)."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import networkx as nx
import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "nemesis", "workloads", "checkers", "reports", "systems", "replica")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


@functools.cache
def import_graph() -> nx.DiGraph:
    mods = modules()

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                # `from pkg import sub` imports the module pkg.sub; `from mod import name`, mod
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in filter(None, map(owner, names)):
                if target != mod:
                    g.add_edge(mod, target)
    return g


def layers() -> list[list[str]]:
    """The table of docs/extending.md ("## Layers"): row i -> its module prefixes."""
    text = (REPO / "docs" / "extending.md").read_text()
    section = text.split("## Layers", 1)[1]
    rows = [line for line in section.splitlines() if re.match(r"^\| \d+ \|", line)]
    assert rows, "docs/extending.md has no layer table"
    table = {int(line.split("|")[1]): re.findall(r"`([\w.]+)`", line.split("|")[2]) for line in rows}
    assert sorted(table) == list(range(len(table))), "layers are numbered 0, 1, 2, ..."
    return [table[i] for i in range(len(table))]


def layer_of(mod: str, table: list[list[str]]) -> int | None:
    best = None
    for i, prefixes in enumerate(table):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return None if best is None else best[0]


def test_only_the_replica_and_its_adapter_import_replica():
    g = import_graph()
    outside = sorted(m for m, t in g.edges if (t == "replica" or t.startswith("replica."))
                     and not (m == "replica" or m.startswith(("replica.", "systems.replica"))))
    assert outside == []


def test_there_is_no_import_cycle():
    assert list(nx.simple_cycles(import_graph())) == []


def test_no_module_imports_a_higher_layer():
    g, table = import_graph(), layers()
    unplaced = [m for m in g if layer_of(m, table) is None and m not in PACKAGES]
    assert unplaced == [], "modules that no layer of docs/extending.md covers"
    upward = [f"{m} (layer {layer_of(m, table)}) imports {t} (layer {layer_of(t, table)})"
              for m, t in g.edges
              if layer_of(m, table) is not None and layer_of(t, table) is not None
              and layer_of(t, table) > layer_of(m, table)]
    assert upward == []


def test_the_checks_can_fail():
    """The graph sees imports inside functions and relative imports."""
    g = import_graph()
    assert g.has_edge("harness.cli", "harness.runner")          # imported inside a command
    assert g.has_edge("reports.report", "reports.ops")         # `from .ops import ...`
    assert layer_of("nemesis.scenarios.cli", layers()) > layer_of("nemesis.scenarios", layers())

"""The layout and the import graph of the harness, from the source (ast, every
import statement, also those inside functions): the top-level packages are
those of docs/extending.md's layout table (and pyproject installs exactly the
installed ones), nothing outside the replica's adapter imports `replica`,
there is no cycle, no module imports one of a higher layer than its own (the
layers are the table in docs/extending.md), `history` imports only itself and
the store layout, nothing installed imports the benchmarks, and no two
modules are called `store.py`."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import networkx as nx
import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def layout() -> dict[str, bool]:
    """The table of docs/extending.md ("## Layout"): top-level package -> installed."""
    text = (REPO / "docs" / "extending.md").read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if re.match(r"^\| `\w+` \|", line)]
    assert rows, "docs/extending.md has no layout table"
    return {re.search(r"`(\w+)`", row[1]).group(1): row[3].strip() == "yes" for row in rows}


PACKAGES = tuple(name for name, installed in layout().items() if installed)


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
    assert layer_of("scenarios.cli", layers()) > layer_of("scenarios", layers())
    assert g.has_edge("history.jsonl_parquet", "history.formats")
    assert g.has_edge("history.flatten", "harness.run_store")


def test_the_layout_table_is_the_folders_on_disk():
    on_disk = {p.parent.name for p in REPO.glob("*/__init__.py")} | {"replica", "bench"}  # namespace packages
    assert sorted(on_disk - {"tests"}) == sorted(layout())


def test_pyproject_installs_the_installed_packages_only():
    import tomllib

    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(include) == sorted(f"{p}*" for p in PACKAGES)


def test_history_imports_only_itself_and_the_store_layout():
    g = import_graph()
    out = sorted(f"{m} imports {t}" for m, t in g.edges
                 if m.split(".")[0] == "history" and t.split(".")[0] != "history" and t != "harness.run_store")
    assert out == []


def test_no_installed_module_imports_the_benchmarks():
    found = []
    for mod, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{mod} imports {n}" for n in names if n == "bench" or n.startswith("bench.")]
    assert found == []


def test_module_names_say_what_they_are():
    """No two `store.py` (the run store, checking a store, the report's reading of one, the
    simulated object store), and the replica's processes are not named like its cores."""
    assert sorted(str(p.relative_to(REPO)) for p in modules().values() if p.name == "store.py") == []
    assert not (REPO / "replica" / "broker.py").exists() and not (REPO / "replica" / "controller.py").exists()

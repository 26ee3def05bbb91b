"""The era rules table (replica/core/eras.py) is the only place that tells the
protocol generations apart: no era comparison is left in replica/core/ outside
it, and each era differs from the one before in exactly the rules that
docs/DESIGN.md ("Protocol generations") names for it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from replica import protocol
from replica.core import eras

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "replica" / "core"


def design_changes() -> dict[str, set[str]]:
    """era -> the rules its DESIGN.md paragraph says changed from the era before."""
    text = (REPO / "docs" / "DESIGN.md").read_text()
    section = text.split("### Protocol generations", 1)[1].split("\n### ", 1)[0]
    out = {}
    for bullet in re.split(r"\n- (?=`)", section)[1:]:
        era = re.match(r"`(\w+)`", bullet).group(1)
        changed = re.search(r"Rules changed from `\w+`\s+\(replica/core/eras\.py\):(.*?)\.", bullet, re.S)
        out[era] = set(re.findall(r"`(\w+)`", changed.group(1))) if changed else set()
    return out


def test_the_table_renders_one_line_per_rule_and_one_column_per_era():
    lines = eras.render().splitlines()
    assert lines[0].split() == list(eras.ERAS) == list(protocol.ERAS)
    assert [line.split()[0] for line in lines[1:]] == list(eras.RULES)
    assert len(eras.RULES) >= 8


def test_each_era_differs_from_the_one_before_in_exactly_the_rules_design_names():
    named = design_changes()
    assert list(named) == list(eras.ERAS)
    assert named[eras.ERAS[0]] == set()
    for older, newer in zip(eras.ERAS, eras.ERAS[1:]):
        assert set(eras.differences(older, newer)) == named[newer], (older, newer, eras.render())
        assert named[newer] <= set(eras.RULES)


def test_no_era_comparison_is_left_in_the_core_outside_the_table():
    found = []
    for path in sorted(CORE.glob("*.py")):
        if path.name == "eras.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                names = [n for n in [node.left, *node.comparators]
                         if isinstance(n, ast.Attribute) and n.attr == "era" or isinstance(n, ast.Name) and n.id == "era"
                         or isinstance(n, ast.Constant) and n.value in eras.ERAS]
                if names:
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_an_unknown_era_is_one_line():
    with pytest.raises(ValueError, match=r"unknown era 'kip999' \(use hw, kip101, epoch\)"):
        eras.rules("kip999")

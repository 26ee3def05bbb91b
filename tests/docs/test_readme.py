"""The README is a front door (issue 39): at most 150 lines, opening with the two set-up
commands (the demo, the whole suite), the suite being what CI runs; measured findings live
on docs/findings/, not in it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_readme_is_short_and_opens_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    first_block = re.search(r"```\n(.*?)```", text, re.S).group(1).splitlines()
    assert [line.split("#")[0].strip() for line in first_block] == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_every_findings_entry_says_when_on_what_and_how():
    """Each measured claim on a findings page sits under a table row with its date, commit and command."""
    for page in sorted((REPO / "docs" / "findings").glob("*.md")):
        if page.name == "index.md":
            continue
        sections = re.split(r"\n## ", page.read_text())[1:]
        assert sections, page
        for section in sections:
            title = section.splitlines()[0]
            rows = re.findall(r"^\| (\d{4}-\d\d-\d\d[^|]*) \| ([^|]*) \| ([^|]*) \|$", section, re.M)
            if not rows:  # a pointer to another page, with no figure of its own
                assert not re.search(r"\d+ of \d+", section), (page.name, title)
                continue
            date, commit, command = rows[0]
            assert re.search(r"`[0-9a-f]{7}`", commit), (page.name, title, commit)
            assert "harness " in command or "bench/" in command, (page.name, title, command)


def test_the_systems_table_lists_what_each_system_supports():
    """The README's systems table names, per system, exactly the faults the registry says it supports."""
    from harness import registry

    text = (REPO / "README.md").read_text()
    faults = registry.load_all(registry.FAULTS)
    for name, system in registry.load_all(registry.SYSTEMS).items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, f"README's systems table has no row for {name}"
        entries = [f.strip() for f in row.split("|")[3].split(",")]
        listed = {e for e in entries if "(" not in e}
        with_option = {e.split("(")[0].strip() for e in entries if "(" in e}   # "remote-store (with ... on)"
        capabilities = system.capabilities_in()   # with the defaults
        missing = {f: capabilities[next(n for n in kind.needs if not capabilities.has(n))]
                   for f, kind in faults.items() if not all(capabilities.has(n) for n in kind.needs)}
        assert listed == set(faults) - set(missing), (name, listed)
        # a fault listed "with" something is one the defaults lack for a reason that says how to turn it on
        assert all(f in missing and "turn it on" in missing[f] for f in with_option), (name, with_option, missing)

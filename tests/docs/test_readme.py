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

"""The generated reference pages (docs/reference/{cli,anomalies,faults,scenarios}.md) equal what
the code says now: `python -m harness.docs --check` regenerates them and compares."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness import docs

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_reference_pages_equal_the_code():
    # a fresh interpreter: no test's run-time registration can leak into the pages
    out = subprocess.run([sys.executable, "-m", "harness.docs", "--check"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return docs.generate()


def test_the_pages_come_from_the_registries_and_the_vocabulary(pages):
    from checkers.vocabulary import VOCABULARY
    from harness import registry
    from scenarios.script import list_scenarios

    for fault in registry.names(registry.FAULTS):
        assert f"| `{fault}` |" in pages["faults.md"], fault
    for system in registry.names(registry.SYSTEMS):
        assert f"`{system}`" in pages["faults.md"], system
    for anomaly in VOCABULARY.values():
        assert f"| `{anomaly.name}` |" in pages["anomalies.md"]
        for name in anomaly.jepsen:
            assert f"`{name}`" in pages["anomalies.md"]
    for name in list_scenarios():
        assert f"| `{name}` |" in pages["scenarios.md"], name
    assert "## `harness campaign run`" in pages["cli.md"] and "`--nemesis <str>`" in pages["cli.md"]


def test_a_stale_page_is_reported(pages, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(docs, "REFERENCE", tmp_path)
    monkeypatch.setattr(docs, "generate", lambda: pages)
    assert docs.main([]) == 0 and docs.main(["--check"]) == 0
    (tmp_path / "faults.md").write_text((tmp_path / "faults.md").read_text().replace("`kill`", "`kil`"))
    assert docs.main(["--check"]) == 1
    assert "faults.md" in capsys.readouterr().err

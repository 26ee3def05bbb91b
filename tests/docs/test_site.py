"""The documentation site builds in strict mode: a broken link, a missing page or a page left
out of the nav fails the suite (mkdocs.yml's `validation`), as it would fail `mkdocs build`."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, env=env, timeout=240)


def test_the_site_builds_strictly(tmp_path):
    out = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stderr[-3000:]
    for page in ("index.html", "getting-started/index.html", "reference/cli/index.html",
                 "findings/kafka/index.html", "systems/nats/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def test_a_broken_link_fails_the_build(tmp_path):
    """The check can fail: a copy of the docs with one link to a page that does not exist."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(REPO / "docs"), str(docs)], check=True)
    page = docs / "getting-started.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((REPO / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}"))
    out = build(config, tmp_path / "site")
    assert out.returncode != 0
    assert "no-such-page.md" in out.stderr

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
    """The check can fail: the site's own settings (strict, validation) on a one-page site whose
    page links to a page that does not exist."""
    import yaml

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing page](no-such-page.md).\n")
    small = {"site_name": "check", "docs_dir": str(docs), "strict": config["strict"],
             "validation": config["validation"], "theme": config["theme"], "nav": [{"Home": "index.md"}]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(small))
    out = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert out.returncode != 0
    assert "no-such-page.md" in out.stderr

"""The Python packages installed are exactly those of requirements.lock (what
scripts/setup.sh installs with pip -c), so a clean clone tests what the
repository was tested with. After changing pyproject.toml's dependencies:
`bash scripts/lock.sh`, then `bash scripts/setup.sh`."""
from __future__ import annotations

import re
from importlib.metadata import distributions
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"
NOT_LOCKED = {"pip", "setuptools", "wheel", "replog-harness"}  # pip freeze leaves these out


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"requirements.lock: {line!r} is not name==version"
            pins[canonical(name)] = version.strip()
    return pins


def installed() -> dict[str, str]:
    return {canonical(d.metadata["Name"]): d.version for d in distributions()
            if canonical(d.metadata["Name"]) not in NOT_LOCKED}


def test_installed_versions_are_the_locked_ones():
    pins, have = locked(), installed()
    fix = "; refresh with `bash scripts/lock.sh` and reinstall with `bash scripts/setup.sh`"
    assert {n: have.get(n) for n in pins if have.get(n) != pins[n]} == {}, "locked but not installed at that version" + fix
    assert sorted(set(have) - set(pins)) == [], "installed but not in requirements.lock" + fix


def test_the_lock_pins_every_direct_dependency():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    names = {canonical(re.match(r"[A-Za-z0-9_.-]+", spec).group()) for spec in wanted}
    assert sorted(names - set(locked())) == []

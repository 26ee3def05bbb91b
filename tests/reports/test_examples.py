"""The example spec files load as they are documented (a typo in one fails here)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.spec import build_spec

pytestmark = pytest.mark.unit

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_spec_loads(path):
    spec = build_spec(str(path))
    assert spec.name == path.stem and spec.seed is not None


def test_flags_override_the_example():
    spec = build_spec(str(EXAMPLES[0]), seed=7, time_limit=5)
    assert (spec.seed, spec.time_limit, spec.system_options["era"]) == (7, 5, "hw")


def test_there_is_an_example():
    assert EXAMPLES

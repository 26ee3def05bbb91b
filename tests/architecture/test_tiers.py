"""Test tiers are declared, not guessed: a test with no tier marker, or two, stops
the collection with one line (tests/conftest.py), so `pytest -m unit` selects
exactly the tests that say they are unit tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
CONFTEST = "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"


def collect(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_some.py").write_text("import pytest\n\n" + body)
    return subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                           "-m", "unit", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_a_test_without_a_tier_stops_the_collection(tmp_path):
    out = collect(tmp_path, "def test_a():\n    pass\n")
    assert out.returncode == 4
    assert "do not declare exactly one tier" in out.stderr and "test_some.py::test_a (none)" in out.stderr


def test_a_test_with_two_tiers_stops_the_collection(tmp_path):
    out = collect(tmp_path, "pytestmark = pytest.mark.unit\n\n@pytest.mark.spark\ndef test_a():\n    pass\n")
    assert out.returncode == 4 and "(spark, unit)" in out.stderr


def test_a_declared_tier_is_what_minus_m_selects(tmp_path):
    out = collect(tmp_path, "@pytest.mark.unit\ndef test_a():\n    pass\n\n"
                            "@pytest.mark.spark\ndef test_b():\n    pass\n")
    assert out.returncode == 0, out.stderr
    assert "test_some.py::test_a" in out.stdout and "test_b" not in out.stdout


MODULES = {
    "test_pure.py": "pytestmark = pytest.mark.unit\n\ndef test_u():\n    pass\n",
    "test_sparky.py": "@pytest.mark.unit\ndef test_u():\n    pass\n\n@pytest.mark.spark\ndef test_s():\n    pass\n",
    "test_mixed.py": "@pytest.mark.unit\ndef test_u():\n    pass\n\n@pytest.mark.root\ndef test_r():\n    pass\n",
    "test_page.py": "pytestmark = pytest.mark.browser\n\ndef test_b():\n    pass\n",
}


def test_the_streams_split_by_module_and_cover_every_test(tmp_path):
    """scripts/test.sh's `--stream`: a module whose every test is unit or spark is in-process
    (`spark` if it has a Spark test), any other module goes whole (its unit tests too) to
    the cluster stream (tests/kafka and KAFKA_STREAM_MODULES: kafka; tests/nats, tests/docker and
    CLUSTER_2_MODULES: cluster-2; none here)."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_addoption, "
                                          "pytest_collection_modifyitems  # noqa: F401\n")
    for name, body in MODULES.items():
        (tmp_path / name).write_text("import pytest\n\n" + body)

    def ids(*args: str) -> set[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *args,
                              str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert out.returncode in (0, 5), out.stdout + out.stderr  # 5: the stream has no test here
        return {line.strip().rsplit("/", 1)[-1] for line in out.stdout.splitlines() if "::" in line}

    everything, side, spark = ids(), ids("--stream", "in-process"), ids("--stream", "spark")
    cluster, real = ids("--stream", "cluster"), ids("--stream", "kafka")
    assert side == {"test_pure.py::test_u"}
    assert spark == {"test_sparky.py::test_u", "test_sparky.py::test_s"}
    assert cluster == {"test_mixed.py::test_u", "test_mixed.py::test_r", "test_page.py::test_b"}
    assert not real and not ids("--stream", "cluster-2")
    assert side | spark | cluster == everything and len(side) + len(spark) + len(cluster) == len(everything)


def test_modules_whose_spark_is_their_own_go_in_process_and_never_ask_for_the_session():
    """OWN_SPARK_MODULES (tests/conftest.py) run in the in-process stream: a test of theirs
    that asked for the `spark` fixture would start a second session JVM there."""
    import ast

    from tests.conftest import IN_PROCESS_TIERS, OWN_SPARK_MODULES, stream_of

    assert OWN_SPARK_MODULES
    for module in OWN_SPARK_MODULES:
        assert stream_of(module, {"spark"}) == "in-process" and {"spark"} <= IN_PROCESS_TIERS
        source = (REPO / module).read_text()
        asked = [node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
                 and "spark" in [a.arg for a in node.args.args]]
        assert not asked and 'getfixturevalue("spark")' not in source, f"{module} asks for the spark fixture"
    assert stream_of("tests/checkers/test_bench.py", {"spark"}) == "spark"

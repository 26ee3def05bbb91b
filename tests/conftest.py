"""Suite-wide rules.

In CI (CI=true) a skipped test is a failure: every test there has what it
needs installed by scripts/setup.sh, so a skip means a missing install step
that would otherwise hide behind a green run.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI (CI=true), which the suite does not allow: {reason}"


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def hw_data_loss_runs(tmp_path_factory):
    """Real `harness scenario hw-data-loss` runs on the netns backend, once per
    session, in eras hw and epoch: {era: (completed process, store dir)}.
    Shared by the scenario tests and the report tests (real stores)."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    runs = {}
    for era, subnet in (("hw", "10.215.1.0/24"), ("epoch", "10.215.4.0/24")):
        tmp = tmp_path_factory.mktemp(f"hw-data-loss-{era}")
        env = dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp / "runs"),
                   HARNESS_WORK_ROOT=str(tmp / "work"))
        out = subprocess.run([sys.executable, "-m", "harness", "scenario", "hw-data-loss", "--era", era,
                              "--store", str(tmp / "store"), "--subnet", subnet],
                             capture_output=True, text=True, cwd=tmp, env=env, timeout=200)
        lines = out.stdout.strip().splitlines()
        runs[era] = (out, Path(lines[-1]) if lines else None)
    return runs


# -- test tiers ----------------------------------------------------------------
# Every test belongs to one tier (pyproject.toml markers): `pytest -m unit` is the
# seconds-long inner loop; the README's test command runs every tier. A module or a
# test may name its tier with a marker; otherwise it follows from what it needs.
TIERS = ("unit", "root", "docker", "spark", "browser")
_ROOT_SIGNS = ("needs_root", "need_root", "geteuid", "NetnsCluster", "hw_data_loss_runs", "run_harness")
# Modules whose need does not show in a fixture or a root check: real daemons of
# libfaketime, and report pages rendered from whole stores (the browser tier's pages).
MODULE_TIERS = {
    "tests/nemesis/test_clock.py": "root",
    "tests/checkers/test_spark_master.py": "spark",
    "tests/reports/test_report_page.py": "browser",
    "tests/reports/test_report_scale.py": "browser",
    "tests/reports/test_linear_page.py": "browser",
}
_module_needs_root: dict[str, bool] = {}


def _tier(item) -> str:
    own = [m.name for m in item.iter_markers() if m.name in TIERS]
    if own:
        return own[0]
    path = Path(str(item.fspath))
    rel = path.relative_to(REPO)
    if rel.as_posix() in MODULE_TIERS:
        return MODULE_TIERS[rel.as_posix()]
    if "docker" in rel.parts[:2]:
        return "docker"
    fixtures = set(getattr(item, "fixturenames", ()))
    if "local_cluster" in fixtures:  # real replica processes (tests/replica/cluster_fixture.py)
        return "root"
    if fixtures & {"browser", "page", "chromium"}:
        return "browser"
    if "spark" in fixtures:
        return "spark"
    if str(path) not in _module_needs_root:
        text = path.read_text(errors="replace")
        _module_needs_root[str(path)] = any(sign in text for sign in _ROOT_SIGNS)
    return "root" if _module_needs_root[str(path)] else "unit"


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = _tier(item)
        if not any(m.name == tier for m in item.iter_markers()):
            item.add_marker(getattr(pytest.mark, tier))


def pytest_sessionfinish(session, exitstatus):
    """Every results.json the suite wrote holds the log and linearizability verdicts to one
    rule (tests/checkers/test_linearizability.py): a lost or divergent acknowledged write is
    not linearizable, and a history the log checker passes is. A disagreement fails the run."""
    try:
        base = session.config._tmp_path_factory.getbasetemp()
    except (AttributeError, ValueError):
        return
    from tests.checkers.test_linearizability import disagreement

    found = []
    for path in Path(base).rglob("results.json"):
        problem = disagreement(path)
        if problem:
            found.append(f"{path}: {problem}")
    if found:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for line in found:
            if reporter is not None:
                reporter.write_line(f"linearizability disagrees with the log checker: {line}", red=True)
        session.exitstatus = 1


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium (Playwright) per test module.

    Module scope, not session: Playwright's sync API keeps an asyncio loop marked
    running on the main thread until it stops, and every later test that calls
    asyncio.run() would fail with "cannot be called from a running event loop"."""
    sys.path.insert(0, str(REPO / "tests" / "reports"))
    from reports_browser import Browser, chromium_path

    exe = chromium_path()
    if exe is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    pytest.importorskip("playwright", reason="playwright is not installed (pyproject test extra)")
    b = Browser(exe)
    try:
        yield b
    finally:
        b.close()

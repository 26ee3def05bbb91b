"""Suite-wide rules.

In CI (CI=true) a skipped test is a failure: every test there has what it
needs installed by scripts/setup.sh, so a skip means a missing install step
that would otherwise hide behind a green run.
"""
import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI (CI=true), which the suite does not allow: {reason}"

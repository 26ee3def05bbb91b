"""Suite-wide rules.

In CI (CI=true) a skipped test is a failure: every test there has what it
needs installed by scripts/setup.sh, so a skip means a missing install step
that would otherwise hide behind a green run.
"""
import json
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
    """Real `harness scenario hw-data-loss --json` runs on the netns backend, once per
    session, in eras hw and epoch: {era: (completed process, store dir)}.
    Shared by the scenario tests and the report tests (real stores); stdout is the
    one JSON document of `--json` (tests/scenarios/test_scenario_e2e.py reads it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    runs = {}
    for era, subnet in (("hw", "10.215.1.0/24"), ("epoch", "10.215.4.0/24")):
        tmp = tmp_path_factory.mktemp(f"hw-data-loss-{era}")
        env = dict(os.environ, PYTHONPATH=str(REPO), CI="true", HARNESS_RUN_DIR=str(tmp / "runs"),
                   HARNESS_WORK_ROOT=str(tmp / "work"))
        out = subprocess.run([sys.executable, "-m", "harness", "scenario", "hw-data-loss", "--era", era,
                              "--store", str(tmp / "store"), "--subnet", subnet, "--json"],
                             capture_output=True, text=True, cwd=tmp, env=env, timeout=200)
        try:
            store = json.loads(out.stdout).get("store")
        except ValueError:
            store = None
        runs[era] = (out, Path(store) if store else None)
    return runs


# -- test tiers ----------------------------------------------------------------
# Every test belongs to exactly one tier (pyproject.toml markers), declared in the
# test module (`pytestmark = pytest.mark.unit`), or, in a module of several tiers, on
# each test or parameter: `pytest -m unit` is the seconds-long inner loop; the README's
# test command runs every tier. A test with no tier or two stops the collection.
TIERS = ("unit", "root", "docker", "spark", "browser")


def tiers_of(item) -> set[str]:
    return {m.name for m in item.iter_markers() if m.name in TIERS}


# The five streams of scripts/test.sh (`--stream`), which run at once: the modules whose
# every test is in-process (tiers unit and spark), at a lower CPU priority, take the CPU
# that the cluster tests leave idle while they wait on faults; they are split in two, the
# modules with a Spark test (`spark`: one JVM, two cores) and the rest (`in-process`: one
# core each), so that whichever ends last does not leave a core idle (one in-process
# stream ran on one core for its last two minutes). The cluster modules (root, docker,
# browser tiers) are split in three, each a sequence of its own (one stream took 22 min,
# mostly waiting): Kafka's (`kafka`: tests/kafka, JVMs), a second one (`cluster-2`:
# NATS's and Docker's modules and the replica modules of CLUSTER_2_MODULES, which mostly
# wait on servers, an engine or faults) and the rest (`cluster`: the replica model on
# namespaces, campaigns, reports); the modules of KAFKA_STREAM_MODULES go with Kafka's. Balanced by wall time, clean clones of 2026-11-29: Kafka,
# NATS and Docker in one stream took 916 s, the replica model's 694, the Spark stream 641;
# with Docker's and those replica modules apart, Kafka and NATS took 680 s, the second
# stream 333, the replica model's 480. Every cluster test names its own subnet or run id,
# and the modules that share a session fixture (hw_data_loss_runs's runs) stay in one
# stream, so the streams do not meet. A module goes whole to one stream, so its module
# fixtures run once. Without `--stream`, every test runs, one after another.
IN_PROCESS_TIERS = {"unit", "spark"}
# The clean clone of 2026-11-29 07:28 (745 s): cluster-2 ended last at 697 s, the kafka
# stream at 479; the replaced-disk module (106 s, replica model) moved to the kafka stream.
KAFKA_STREAM_MODULES = ("tests/scenarios/test_replaced_disk_e2e.py",)
CLUSTER_2_MODULES = ("tests/scenarios/test_tiered_e2e.py", "tests/harness/test_targeted_run.py")
# Modules with a Spark test whose Spark runs in JVMs of its own (a standalone cluster and a
# driver in a subprocess), not in the `spark` fixture's session: the in-process stream, which
# has the time (three clean clones of 2026-11-29 ended with the spark stream alone for its last
# 40-90 s, the in-process stream 150-190 s before it). They must not ask for the `spark`
# fixture (tests/architecture/test_tiers.py), or that stream would start a session too.
OWN_SPARK_MODULES = ("tests/checkers/test_spark_cluster.py",)
OWN_PATHS = {"kafka": ("tests/kafka/", *KAFKA_STREAM_MODULES),
             "cluster-2": ("tests/nats/", "tests/docker/", *CLUSTER_2_MODULES)}
STREAMS = ("in-process", "spark", "cluster", "kafka", "cluster-2")


def pytest_configure(config):
    if os.environ.get("HARNESS_TEST_CPU"):  # per-test CPU seconds: tests/cpu_accounting.py
        from tests.cpu_accounting import CpuAccounting
        config.pluginmanager.register(CpuAccounting(os.environ["HARNESS_TEST_CPU"]), "cpu-accounting")


def pytest_addoption(parser):
    parser.addoption("--stream", choices=STREAMS, default=None,
                     help="only the in-process modules without a Spark test (unit tier), only those with "
                          "one (unit and spark tiers), only Kafka's cluster modules (tests/kafka), only "
                          "NATS's, Docker's and the modules of CLUSTER_2_MODULES (cluster-2) or only the "
                          "other cluster modules (scripts/test.sh runs the five at once)")


def pytest_ignore_collect(collection_path, config):
    """The kafka and cluster-2 streams do not import the other test modules (a collection
    8.7 -> 3.6 CPU-s); the other streams need tiers from every module."""
    own = OWN_PATHS.get(config.getoption("--stream", default=None))
    if own is None or collection_path.suffix != ".py":
        return None
    try:
        module = collection_path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return None
    return None if module.startswith(own) or not module.startswith("tests/") else True


def stream_of(module: str, module_tiers: set[str]) -> str:
    if module_tiers <= IN_PROCESS_TIERS:
        return "spark" if "spark" in module_tiers and module not in OWN_SPARK_MODULES else "in-process"
    return next((stream for stream, paths in OWN_PATHS.items() if module.startswith(paths)), "cluster")


def pytest_collection_modifyitems(config, items):
    wrong = [(item.nodeid, tiers_of(item)) for item in items if len(tiers_of(item)) != 1]
    if wrong:
        nodeid, found = wrong[0]
        raise pytest.UsageError(f"{len(wrong)} tests do not declare exactly one tier, e.g. {nodeid} "
                                f"({', '.join(sorted(found)) or 'none'}): mark the module (`pytestmark = "
                                f"pytest.mark.<tier>`) or, in a module of several tiers, each test "
                                f"(tiers: {', '.join(TIERS)})")
    stream = config.getoption("--stream", default=None)
    if stream is None:
        return
    module_tiers: dict[str, set[str]] = {}
    for item in items:
        module_tiers.setdefault(item.nodeid.split("::")[0], set()).update(tiers_of(item))
    keep = [item for item in items
            if stream_of(item.nodeid.split("::")[0], module_tiers[item.nodeid.split("::")[0]]) == stream]
    kept = set(keep)
    dropped = [item for item in items if item not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


_REBUILT: set[Path] = set()   # scenario stores already checked by `scenario_stores_rebuild`


def _files_named(base: Path, name: str) -> list[Path]:
    """Every file called `name` under base. Not Path.rglob: a module's brokers are still
    running while this walks, and a directory they delete mid-walk (Kafka removing a
    deleted topic's log-0) made rglob raise FileNotFoundError; os.walk skips it."""
    return [Path(d) / name for d, _, files in os.walk(base) if name in files]


@pytest.fixture(autouse=True)
def scenario_stores_rebuild(request):
    """After each cluster test (tiers root, docker): every scenario store it made must be
    rebuilt by `harness check` with its results.json deleted, to the same verdict and
    scenario section (issue 38: the history is the run's one record). Session fixtures'
    stores (hw_data_loss_runs) are checked after the first test that used them."""
    yield
    if not tiers_of(request.node) & {"root", "docker"}:
        return
    try:
        base = Path(request.config._tmp_path_factory.getbasetemp())
    except (AttributeError, ValueError):
        return
    from tests.scenarios.rebuild import is_scenario_store, rebuild_problem

    stores = {p.parent.resolve() for p in _files_named(base, "scenario.json")} - _REBUILT   # `latest` links: once
    problems = []
    for store in sorted(stores):
        if not is_scenario_store(store):
            continue
        _REBUILT.add(store)
        problem = rebuild_problem(store)
        if problem:
            problems.append(problem)
    assert not problems, "harness check does not rebuild the scenario: " + "; ".join(problems)


def pytest_sessionfinish(session, exitstatus):
    """Every results.json the suite wrote holds the log and linearizability verdicts to one
    rule (tests/checkers/verdict_rule.py): a lost or divergent acknowledged write is
    not linearizable, and a history the log checker passes is. A disagreement fails the run."""
    try:
        base = session.config._tmp_path_factory.getbasetemp()
    except (AttributeError, ValueError):
        return
    from tests.checkers.verdict_rule import disagreement

    found = []
    for path in _files_named(Path(base), "results.json"):
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


# `spark`: one SparkSession for the whole test session (JVM start-up on two cores takes half
# a minute, and a JVM's first check another minute of CPU; every Spark test reuses it). Small
# shuffle width: test data is tiny.

@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from checkers.spark.session import spark_session, stop_spark_session

    session = spark_session(shuffle_partitions=2)
    yield session
    stop_spark_session()

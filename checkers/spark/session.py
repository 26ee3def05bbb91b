"""One place that builds the SparkSession every Spark driver uses.

Why a factory: on this 2-core machine `local[2]` is the right default, Java 17
needs `--add-opens` flags for Spark's reflective access, the default shuffle
width (200 partitions) is far too wide for a laptop-sized job, and Spark's
INFO logging drowns the harness output. Tests reuse one session (the builder's
getOrCreate returns the running one), so the JVM starts once per test run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import tempfile
import threading
import zipfile
from contextlib import contextmanager
from urllib.parse import urlsplit

LOG4J_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
DEFAULT_MASTER = "local[2]"
DEFAULT_DRIVER_MEMORY = "2g"

# Spark 3.3+ on Java 17 needs these packages opened for its off-heap and
# reflection tricks; without them some jobs fail with InaccessibleObjectException.
JAVA17_OPENS = " ".join(
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in (
        "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net",
        "java.nio", "java.util", "java.util.concurrent",
        "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs", "sun.security.action",
        "sun.util.calendar",
    )
) + " -Djdk.reflect.useDirectMethodHandle=false"

# Later C2 compilation: a check runs dozens of short queries, each with its own
# generated classes, and with C2's default thresholds JIT compilation took a
# third of a 10M-op check's CPU on two cores (91 of 282 CPU-s). Only code that
# stays hot is worth C2; measured 243 CPU-s with these thresholds.
JIT_THRESHOLDS = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4CompileThreshold=60000 "
                  "-XX:Tier4BackEdgeThreshold=400000")

# The throughput collector: a check allocates short-lived rows at a high rate, and G1's
# concurrent work took 12 of a warm 10M-op check's 115 JVM CPU-s; ParallelGC took 4
# (and the check 59.5 s instead of 65 s, same run).
GC = "-XX:+UseParallelGC"

# Compiled whole-stage code is cached by its source; a check runs more distinct
# stages than Spark's default 100 entries, so a second check in one session
# compiled (and JIT-warmed) everything again: 13 CPU-s of JIT in a warm check, 8
# with room for every stage.
CODEGEN_CACHE_ENTRIES = "2000"


MASTER_CONNECT_TIMEOUT = 3.0
"""Seconds to wait for a standalone master's port before giving up (Spark itself
retries registration for 60 s and then prints a Java stack trace)."""


class SparkMasterError(ValueError):
    """No Spark master answers at the given URL; the message names it and the fix."""


def resolve_master(master: str | None = None) -> str:
    """The master to use: the given one, else $CHECKERS_SPARK_MASTER, else local[2]."""
    return master or os.environ.get("CHECKERS_SPARK_MASTER") or DEFAULT_MASTER


def check_master(master: str, timeout: float = MASTER_CONNECT_TIMEOUT) -> None:
    """Fail fast, in one line, when a standalone master (spark://host:port[,host:port]) does
    not accept a TCP connection. Other masters (local, yarn, k8s) are not probed."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master[len("spark://"):].split(","):
        parts = urlsplit("//" + address)
        try:
            host, port = parts.hostname, parts.port or 7077
        except ValueError:
            raise SparkMasterError(f"--master {master}: {address!r} is not host:port; "
                                   f"give spark://HOST:PORT, e.g. spark://127.0.0.1:7077") from None
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return  # one live master of a list is enough (standby masters are allowed)
        except OSError as err:
            reason = err.strerror or f"no answer in {timeout:g} s"
            problems.append(f"{host}:{port} ({reason})")
    raise SparkMasterError(
        f"no Spark master answers at {master}: {', '.join(problems)}; start one "
        f"(spark-class org.apache.spark.deploy.master.Master) or use --master local[2]")


def check_driver(master: str) -> None:
    """Fail fast, in one line, before any work: a standalone master that does not answer
    (check_master), or a $CHECKERS_SPARK_JAVA_HOME without a Java for a local driver."""
    check_master(master)
    _driver_java_home(master)


def _driver_java_home(master: str) -> str | None:
    """The JAVA_HOME a new driver for `master` is launched with (checkers.spark.java): only a
    local driver gets one; a cluster's executors run the cluster's own Java."""
    from checkers.spark.java import spark_java_home

    return spark_java_home() if master.startswith("local") else None


def spark_session(master: str | None = None, driver_memory: str | None = None,
                  shuffle_partitions: int | None = None, app_name: str = "checkers"):
    """Return the process-wide SparkSession, creating it on first use.

    `master` defaults to $CHECKERS_SPARK_MASTER or local[2]; a cluster master
    URL (spark://host:7077) works too. Settings only apply when the session
    is created: a second call with other options returns the running session.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as err:  # pragma: no cover - depends on the install
        raise RuntimeError("pyspark is not installed: run `.venv/bin/pip install pyspark` "
                           "or use --engine local") from err

    # The Python workers must use this interpreter, not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = resolve_master(master)
    if SparkSession.getActiveSession() is None:
        check_driver(master)
    memory = driver_memory or os.environ.get("CHECKERS_SPARK_DRIVER_MEMORY") or DEFAULT_DRIVER_MEMORY
    partitions = shuffle_partitions or int(os.environ.get("CHECKERS_SPARK_SHUFFLE_PARTITIONS", "8"))
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.driver.memory", memory)
        .config("spark.driver.extraJavaOptions",
                f"{JAVA17_OPENS} {JIT_THRESHOLDS} {GC} -Dlog4j.configurationFile=file:{LOG4J_CONFIG}")
        .config("spark.executor.extraJavaOptions", f"{JAVA17_OPENS} {GC}")
        .config("spark.sql.codegen.cache.maxEntries", CODEGEN_CACHE_ENTRIES)
        .config("spark.sql.shuffle.partitions", str(partitions))
        # No adaptive execution: under AQE a cached DataFrame reports unknown
        # partitioning, so every aggregation and window on (run, key, ...)
        # would shuffle the cached events again (measured: 2-3x slower).
        .config("spark.sql.adaptive.enabled", "false")
        # Keep joins on (run, key, ...) on the existing (run, key) partitioning.
        .config("spark.sql.requireAllClusterKeysForCoPartition", "false")
        # Cached facts are built once and scanned a few times: compressing
        # their columns cost more CPU than the scans saved (measured).
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # The txn checker collects every transaction and edge (integer columns: ~1.1 GB
        # at 10M transactions); the driver's heap is the limit, not the 1 GiB default.
        .config("spark.driver.maxResultSize", "0")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        # Loopback only: a local driver needs no reachable address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1"))
    with _java_for(master):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


_LAUNCHING = threading.Lock()


@contextmanager
def _java_for(master: str):
    """JAVA_HOME set, while a local session's JVM is launched, to the newest Java Spark supports
    here (checkers.spark.java). pyspark passes only os.environ to spark-submit, so it is set
    there and put back right after: later child processes (brokers, a run's tools) keep theirs."""
    home = _driver_java_home(master)
    if home is None:
        yield
        return
    with _LAUNCHING:
        before = os.environ.get("JAVA_HOME")
        os.environ["JAVA_HOME"] = home
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("JAVA_HOME", None)
            else:
                os.environ["JAVA_HOME"] = before


def stop_spark_session() -> None:
    """Stop the running session, if any (end of a CLI run or a test session)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


_SHIPPED: set[int] = set()


def ship_package(spark_context) -> None:
    """Make ``checkers`` and ``history`` (what the checkers read) importable on executors
    (once per SparkContext): their .py files, zipped from this checkout, for the Python
    workers of both linearizability drivers."""
    if id(spark_context) in _SHIPPED:
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
    folder_for_zip = tempfile.mkdtemp(prefix="checkers-pyfiles-")
    atexit.register(shutil.rmtree, folder_for_zip, ignore_errors=True)
    archive = os.path.join(folder_for_zip, "checkers.zip")
    with zipfile.ZipFile(archive, "w") as zf:
        for package in ("checkers", "history"):
            for folder, _, files in os.walk(os.path.join(root, package)):
                for name in files:
                    if name.endswith(".py"):
                        full = os.path.join(folder, name)
                        zf.write(full, os.path.relpath(full, root))
    spark_context.addPyFile(archive)
    _SHIPPED.add(id(spark_context))

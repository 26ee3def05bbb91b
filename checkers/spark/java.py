"""Which Java runs the checkers' local Spark JVM: the newest one Spark supports on this machine.

Why: Spark 4.3 runs on Java 17, 21 and 25, and the same check costs less CPU on 25 (the bench's
10M-op store, one `local[2]` session each, three checks in a row, 2026-11-29: 72.1 / 50.1 /
47.8 s and 125.5 / 86.9 / 81.4 JVM CPU-s on Temurin 25 against 77.7 / 56.5 / 49.9 s and
136.6 / 98.9 / 85.4 on OpenJDK 17; a tiny store's whole `harness check --engine spark`
32.6 against 35.2 CPU-s of the machine). Java 17, which set-up installs, stays the fallback.

Only the local driver's launch sees this choice (`JAVA_HOME` for spark-submit, see
`checkers.spark.session`): a standalone cluster's executors run the cluster's own Java, and
the brokers a run starts (Kafka, the replica) keep theirs. On 25 Spark's launcher opens a
package Java 24 removed, so the JVM prints one more warning line at start
(`package sun.security.action not in java.base`): Spark's, harmless.
$CHECKERS_SPARK_JAVA_HOME names one; `java` of $JAVA_HOME or PATH is used when none is found.
"""

from __future__ import annotations

import functools
import os

PREFERRED = (25, 21)          # Spark 4.3's supported releases newer than the fallback (17)
OLDEST = 17                   # what Spark 4 runs on at all
JVM_FOLDERS = "/usr/lib/jvm"  # where Debian's and Adoptium's packages install a JDK
ENV = "CHECKERS_SPARK_JAVA_HOME"


class JavaHomeError(ValueError):
    """$CHECKERS_SPARK_JAVA_HOME names no Java; the message says how to fix it."""


def major_version(home: str) -> int | None:
    """The feature release of the Java at `home` (25 for 25.0.3), from its `release` file
    (no JVM started), or None when `home` has no runnable bin/java or no readable version."""
    if not os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return None
    try:
        with open(os.path.join(home, "release"), encoding="utf-8") as release:
            for line in release:
                if line.startswith("JAVA_VERSION="):
                    text = line.split("=", 1)[1].strip().strip('"')
                    return int(text.split(".")[0])
    except (OSError, ValueError):
        return None
    return None


def spark_java_home(folders: str = JVM_FOLDERS) -> str | None:
    """JAVA_HOME for the local Spark driver: $CHECKERS_SPARK_JAVA_HOME if set, else the newest
    JDK of PREFERRED under `folders`, else None (Spark then finds Java as it always does)."""
    explicit = os.environ.get(ENV)
    if explicit:
        version = major_version(explicit)
        if version is None or version < OLDEST:
            found = "no Java there (no bin/java with a release file)" if version is None else \
                f"Java {version} there, and Spark needs {OLDEST} or later"
            raise JavaHomeError(f"${ENV}={explicit}: {found}; point it at a JDK folder such as "
                                f"/usr/lib/jvm/java-17-openjdk-amd64, or unset it")
        return explicit
    return _newest(folders)


@functools.cache
def _newest(folders: str) -> str | None:
    """The newest JDK of PREFERRED under `folders` (looked up once per process)."""
    try:
        names = sorted(os.listdir(folders))
    except OSError:
        return None
    found = {}
    for name in names:
        home = os.path.join(folders, name)
        version = major_version(home)
        if version in PREFERRED:
            found.setdefault(version, os.path.realpath(home))
    return next((found[version] for version in PREFERRED if version in found), None)

"""The Java client program (systems/kafka/java/ReplogKafkaClient.java), built per
client version: `org.apache.kafka:kafka-clients:<version>` and Jackson from Maven
Central by package name (`mvn dependency:copy-dependencies` of
systems/kafka/java/pom.xml) into build/kafka-client/<version>/lib, compiled with
the JDK's `javac` into build/kafka-client/<version>/classes. Cached: a build whose
stamp names the same source (its SHA-256) is reused, so set-up and runs after the
first take no time. scripts/setup.sh builds the default version
(`python -m systems.kafka.java_build 4.1.1`); a run with another client version builds
it before any host exists.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from systems.kafka.install import copy_dependencies, maven_failure

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIR = REPO / "systems" / "kafka" / "java"
POM = SOURCE_DIR / "pom.xml"
MAIN = "ReplogKafkaClient"
SETUP_HINT = "bash scripts/setup.sh"


class JavaClientUnavailable(RuntimeError):
    """No build of the Java client for a version (no Maven, no javac, a version Maven
    Central does not serve, or a client too old for the program): one line."""


def build_dir(version: str) -> Path:
    return REPO / "build" / "kafka-client" / version


def source_stamp() -> str:
    """What a build was made from: the program's source and its pom."""
    h = hashlib.sha256()
    for f in sorted(SOURCE_DIR.glob("*.java")) + [POM]:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def class_path(version: str) -> str:
    d = build_dir(version)
    return f"{d / 'classes'}{os.pathsep}{d / 'lib' / '*'}"


def built(version: str) -> bool:
    d = build_dir(version)
    stamp = d / "stamp"
    return stamp.is_file() and stamp.read_text().strip() == source_stamp() and \
        (d / "classes" / f"{MAIN}.class").is_file()


def ensure_built(version: str) -> str:
    """The class path of the version's Java client, building it first if needed."""
    if built(version):
        return class_path(version)
    mvn, javac = shutil.which("mvn"), shutil.which("javac")
    if mvn is None:
        raise JavaClientUnavailable(f"no `mvn` to fetch kafka-clients {version}; install Maven (apt-get install "
                                    f"maven) and run {SETUP_HINT}")
    if javac is None:
        raise JavaClientUnavailable(f"no `javac` to build the Java client; install a JDK (apt-get install "
                                    f"openjdk-17-jdk-headless) and run {SETUP_HINT}")
    d = build_dir(version)
    tmp = d.with_name(version + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = copy_dependencies(mvn, POM, tmp / "lib", f"-Dkafka.version={version}")
    if proc.returncode != 0 or not (tmp / "lib" / f"kafka-clients-{version}.jar").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        why = maven_failure(proc)
        raise JavaClientUnavailable(f"Maven Central does not serve org.apache.kafka:kafka-clients:{version}"
                                    f"{': ' + why[:160] if why else ''}; pick a served version, e.g. "
                                    f"--option client_version=4.1.1")
    proc = subprocess.run([javac, "-J-XX:TieredStopAtLevel=1", "-nowarn", "-d", str(tmp / "classes"), "-cp", str(tmp / "lib" / "*"),
                           *map(str, sorted(SOURCE_DIR.glob("*.java")))], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        first = next((ln.strip() for ln in proc.stderr.splitlines() if "error:" in ln), proc.stderr.strip()[:160])
        raise JavaClientUnavailable(f"the Java client does not build against kafka-clients {version} ({first}); "
                                    f"it needs kafka-clients 3.0 or later")
    (tmp / "stamp").write_text(source_stamp() + "\n")
    shutil.rmtree(d, ignore_errors=True)
    os.replace(tmp, d)
    return class_path(version)


def main(argv: list[str]) -> int:
    """`python -m systems.kafka.java_build VERSION`: build (or find cached) the Java client."""
    if len(argv) != 1:
        print("usage: python -m systems.kafka.java_build VERSION (kafka-clients, e.g. 4.1.1)", file=sys.stderr)
        return 2
    version = argv[0]
    cached = built(version)
    try:
        ensure_built(version)
    except JavaClientUnavailable as e:
        print(f"setup: {e}", file=sys.stderr)
        return 2
    if not cached:
        print(f"setup: the Kafka Java client (kafka-clients {version}) built in "
              f"{build_dir(version).relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

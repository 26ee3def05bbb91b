"""Kafka's jars, by package name from Maven Central (never a tarball).

`build/kafka/<version>/lib/` (ignored by git, cached between runs) holds the
broker's jars and their dependencies, copied there by
`mvn dependency:copy-dependencies` from systems/kafka/maven/pom.xml. The
default version is resolved by scripts/setup.sh (systems/kafka/setup.sh);
another version is resolved the first time a run or a test asks for it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "systems" / "kafka" / "maven" / "pom.xml"
SETUP_HINT = "bash scripts/setup.sh"


class KafkaUnavailable(RuntimeError):
    """No jars for a version (Maven does not serve it, or no Maven): one line."""


def zk_era(version: str) -> bool:
    """Kafka before 4.0 runs here on ZooKeeper (0.10.2, 0.11.0, 2.x: Scala 2.12 jars)."""
    return int(version.split(".")[0]) < 4


def broker_jar(version: str) -> str:
    return f"kafka_{'2.12' if zk_era(version) else '2.13'}-{version}.jar"


def profile(version: str) -> str:
    """The pom's profile of a version line (systems/kafka/maven/pom.xml)."""
    return "zk" if zk_era(version) else "kraft"


def lib_dir(version: str) -> Path:
    return REPO / "build" / "kafka" / version / "lib"


def have_jars(version: str) -> bool:
    d = lib_dir(version)
    return d.is_dir() and (d / broker_jar(version)).is_file()


def ensure_jars(version: str) -> Path:
    """The version's lib folder, resolving it with Maven if it is not there yet."""
    if have_jars(version):
        return lib_dir(version)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable(f"no jars for Kafka {version} in {lib_dir(version).relative_to(REPO)} and no "
                               f"`mvn` to fetch them; install Maven (apt-get install maven) and run {SETUP_HINT}")
    out = lib_dir(version)
    tmp = out.with_name("lib.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = copy_dependencies(mvn, POM, tmp, f"-P{profile(version)}", f"-Dkafka.version={version}")
    if proc.returncode != 0 or not (tmp / broker_jar(version)).is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            out.parent.rmdir()   # no empty folder for a version that does not exist
        except OSError:
            pass
        why = maven_failure(proc)
        raise KafkaUnavailable(f"Maven Central does not serve Kafka {version} (org.apache.kafka:"
                               f"{broker_jar(version).rsplit('-', 1)[0]}:{version}){': ' + why[:160] if why else ''}; pick a served version, e.g. "
                               f"--option version=4.1.1")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


# Maven runs for seconds: C2 compilation and a parallel collector only cost it CPU. Measured
# (systems/kafka/setup.sh from an empty build/, warm ~/.m2, load 12-17): 22.7 CPU-s, 14.5 with these.
MAVEN_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def maven_env() -> dict:
    """The environment for a Maven run: the caller's MAVEN_OPTS if set, else MAVEN_OPTS above."""
    return {**os.environ, "MAVEN_OPTS": os.environ.get("MAVEN_OPTS") or MAVEN_OPTS}


def copy_dependencies(mvn: str, pom: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """`mvn dependency:copy-dependencies` of `pom` (with `args`: profiles, properties) into `out`."""
    return subprocess.run([mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(pom), *args,
                           "dependency:copy-dependencies", f"-DoutputDirectory={out}"],
                          capture_output=True, text=True, timeout=900, env=maven_env())


def maven_failure(proc: subprocess.CompletedProcess) -> str:
    """Maven's one line of why, or "" when the artifact is simply not served (the caller says so)."""
    text = proc.stdout + proc.stderr
    if "Could not resolve dependencies" in text or "not found" in text:
        return ""
    return next((ln.strip() for ln in text.splitlines() if "ERROR" in ln), "")


def tiered_dir(version: str) -> Path:
    """Where the storage module's test jar (LocalTieredStorage) of a version goes."""
    return REPO / "build" / "kafka" / version / "tiered"


def tiered_jar(version: str) -> Path:
    return tiered_dir(version) / f"kafka-storage-{version}-test.jar"


def ensure_tiered_jar(version: str) -> Path:
    """Kafka's own file-system RemoteStorageManager (`LocalTieredStorage`, in the
    storage module's test jar, `org.apache.kafka:kafka-storage:<v>:jar:test`:
    Maven Central serves it for 4.0.0 and later) in build/kafka/<v>/tiered/,
    resolved with `mvn dependency:copy` the first time tiered storage needs it.
    The brokers load it through remote.log.storage.manager.class.path."""
    jar = tiered_jar(version)
    if jar.is_file():
        return jar
    if zk_era(version):
        raise KafkaUnavailable(f"tiered storage (KIP-405) needs Kafka 4.x; {version} has none")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable(f"no {jar.relative_to(REPO)} and no `mvn` to fetch it; install Maven "
                               f"(apt-get install maven) and run {SETUP_HINT}")
    tmp = jar.with_name(jar.name + ".partial")
    proc = subprocess.run([mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(POM), "dependency:copy",
                           f"-Dartifact=org.apache.kafka:kafka-storage:{version}:jar:test",
                           f"-DoutputDirectory={tmp.parent / 'partial'}", "-Dmdep.overWriteReleases=true"],
                          capture_output=True, text=True, timeout=600, env=maven_env())
    got = tmp.parent / "partial" / jar.name
    if proc.returncode != 0 or not got.is_file():
        why = next((ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if "ERROR" in ln), "")
        raise KafkaUnavailable(f"Maven Central does not serve Kafka {version}'s LocalTieredStorage "
                               f"(org.apache.kafka:kafka-storage:{version}:jar:test){': ' + why[:160] if why else ''}")
    os.replace(got, jar)
    shutil.rmtree(tmp.parent / "partial", ignore_errors=True)
    return jar


def java_problem(remote, java: str = "java") -> str | None:
    """One line if the host has no Java 17 or later to run a broker. The
    ZooKeeper-era releases (0.10.2, 0.11.0, 2.8) predate Java 17 but run on it
    (smoke-tested on OpenJDK 17.0.15, 2026-11-26), with jaxb-api on the class path."""
    probe = remote.run(["sh", "-c", 'command -v "$1" >/dev/null && "$1" -version 2>&1 | head -1', "sh", java],
                       check=False)
    first = probe.stdout.strip()
    if probe.returncode != 0 or not first:
        return (f"host {remote.name} has no Java ({java!r} not found); install a JRE 17 or later "
                f"(apt-get install openjdk-17-jre-headless; scripts/setup.sh does it here) or give its path "
                f"with the system option java=/path/to/bin/java")
    m = re.search(r'version "(\d+)', first)
    if m and int(m.group(1)) < 17:
        return (f"host {remote.name}: {java} is Java {m.group(1)}; Kafka 4.x brokers need Java 17 or later "
                f"(apt-get install openjdk-17-jre-headless, or the system option java=/path/to/bin/java)")
    return None

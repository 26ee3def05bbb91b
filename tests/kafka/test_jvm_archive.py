"""The brokers' class-data archive (systems/kafka/jvm.py): set-up makes it for the
default version, a broker's JVM maps it, and a JVM that cannot use it runs without a word."""
from __future__ import annotations

import subprocess

import pytest

from systems.kafka import DEFAULT_VERSION, install, jvm

def _storage_tool(flags: list[str], classpath: str) -> subprocess.CompletedProcess:
    return subprocess.run(["java", *flags, "-cp", classpath, "kafka.tools.StorageTool", "random-uuid"],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.root
@pytest.mark.timeout(300)
def test_the_default_versions_archive_is_mapped_by_a_kafka_jvm():
    assert jvm.ensure_archive(DEFAULT_VERSION) == jvm.archive_path(DEFAULT_VERSION)
    flags = jvm.archive_flags(DEFAULT_VERSION)
    assert flags and flags[0] == f"-XX:SharedArchiveFile={jvm.archive_path(DEFAULT_VERSION)}"
    # -Xshare:on makes a JVM that cannot map the archive exit with an error instead of going on
    out = _storage_tool(["-Xshare:on", *flags], str(install.lib_dir(DEFAULT_VERSION)) + "/*")
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(out.stdout.strip()) == 22      # a Kafka Uuid, and nothing else on stdout


@pytest.mark.root
@pytest.mark.timeout(300)
def test_a_jvm_that_cannot_use_the_archive_runs_without_it_silently():
    """Another class path than the archive's (here: the same jars in the reverse order) fails
    CDS's check; the JVM goes on and prints nothing about it (callers parse stdout)."""
    jvm.ensure_archive(DEFAULT_VERSION)
    jars = sorted(install.lib_dir(DEFAULT_VERSION).glob("*.jar"), reverse=True)
    other = ":".join(str(j) for j in jars)
    out = _storage_tool(jvm.archive_flags(DEFAULT_VERSION), other)
    assert out.returncode == 0 and len(out.stdout.strip()) == 22, out.stdout + out.stderr
    assert "cds" not in (out.stdout + out.stderr).lower() and "archive" not in out.stderr.lower()
    # and -Xshare:on proves the archive really was refused for that class path
    refused = _storage_tool(["-Xshare:on", *jvm.archive_flags(DEFAULT_VERSION)], other)
    assert refused.returncode != 0


@pytest.mark.unit
def test_zookeeper_era_versions_and_a_missing_java_get_no_archive():
    assert jvm.ensure_archive("2.8.2") is None
    assert jvm.ensure_archive(DEFAULT_VERSION, java="/nonexistent/bin/java") is None
    assert jvm.archive_flags(DEFAULT_VERSION, java="/nonexistent/bin/java") == []

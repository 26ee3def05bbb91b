"""Which Java runs the local Spark driver (checkers.spark.java): the newest one Spark supports,
an explicit $CHECKERS_SPARK_JAVA_HOME, a one-line exit 2 when that names no Java, and the
brokers' environment left alone."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.spark import java, session
from checkers.spark.java import ENV, major_version, spark_java_home
from history.formats import write_jsonl
from tests.checkers.log_histories import clean


def _jdk(folder: Path, version: str, runnable: bool = True) -> Path:
    """A folder shaped like a JDK: bin/java and a release file (what the lookup reads)."""
    (folder / "bin").mkdir(parents=True)
    launcher = folder / "bin" / "java"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755 if runnable else 0o644)
    (folder / "release").write_text(f'IMPLEMENTOR="test"\nJAVA_VERSION="{version}"\n')
    return folder


@pytest.mark.unit
def test_the_version_comes_from_the_release_file(tmp_path):
    assert major_version(str(_jdk(tmp_path / "a", "25.0.3"))) == 25
    assert major_version(str(_jdk(tmp_path / "b", "17.0.15"))) == 17
    assert major_version(str(_jdk(tmp_path / "c", "21", runnable=False))) is None
    assert major_version(str(tmp_path / "missing")) is None


@pytest.mark.unit
def test_the_newest_supported_jdk_is_chosen_and_17_is_left_to_spark(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)

    def chosen():
        java._newest.cache_clear()   # looked up once per process: look again
        return spark_java_home(str(tmp_path))

    _jdk(tmp_path / "java-17", "17.0.15")
    assert chosen() is None                                # 17: Spark's own lookup finds it
    _jdk(tmp_path / "java-21", "21.0.8")
    _jdk(tmp_path / "java-26", "26.0.1")                   # not (yet) supported by Spark 4.3
    assert chosen() == str(tmp_path / "java-21")
    _jdk(tmp_path / "temurin-25", "25.0.3")
    assert chosen() == str(tmp_path / "temurin-25")


@pytest.mark.unit
def test_an_explicit_java_home_wins_and_a_wrong_one_is_one_line_exit_2(tmp_path, monkeypatch):
    jdk17 = _jdk(tmp_path / "jdk17", "17.0.15")
    monkeypatch.setenv(ENV, str(jdk17))
    assert spark_java_home(str(tmp_path / "none")) == str(jdk17)
    monkeypatch.setenv(ENV, str(_jdk(tmp_path / "jdk11", "11.0.2")))
    with pytest.raises(java.JavaHomeError, match="Java 11 there, and Spark needs 17 or later"):
        spark_java_home()
    write_jsonl(clean().ops, tmp_path / "history.jsonl")
    env = {**os.environ, ENV: str(tmp_path / "nope")}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(tmp_path), "--engine", "spark"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and ENV in lines[0] and "unset it" in lines[0], proc.stderr
    assert not (tmp_path / "parquet").exists()   # refused before anything was converted


@pytest.mark.unit
def test_java_home_is_set_only_while_a_local_driver_launches(tmp_path, monkeypatch):
    jdk25 = _jdk(tmp_path / "jdk25", "25.0.3")
    monkeypatch.setenv(ENV, str(jdk25))
    monkeypatch.setenv("JAVA_HOME", "/usr/lib/jvm/the-brokers-java")
    with session._java_for("local[2]"):
        assert os.environ["JAVA_HOME"] == str(jdk25)
    assert os.environ["JAVA_HOME"] == "/usr/lib/jvm/the-brokers-java"
    with session._java_for("spark://127.0.0.1:7077"):   # a cluster's executors run their own Java
        assert os.environ["JAVA_HOME"] == "/usr/lib/jvm/the-brokers-java"
    monkeypatch.delenv("JAVA_HOME")
    with session._java_for("local[1]"):
        assert os.environ["JAVA_HOME"] == str(jdk25)
    assert "JAVA_HOME" not in os.environ


@pytest.mark.spark
def test_the_local_driver_runs_the_chosen_java(spark):
    """The shared session's JVM is the Java checkers.spark.java chose (17 or newer if none)."""
    running = int(spark.sparkContext._jvm.java.lang.System.getProperty("java.specification.version"))
    chosen = spark_java_home()
    assert running == (major_version(chosen) if chosen else running) and running >= 17

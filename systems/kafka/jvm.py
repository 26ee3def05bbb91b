"""How the harness starts Kafka's JVMs here: their flags, and a class-data sharing archive
(AppCDS) of a version's jars, from which a broker's JVM maps the classes it needs instead of
reading, parsing and verifying them again.

Measured 2026-11-28 (Kafka 4.1.1, a KRaft combined node, OpenJDK 17, C1 only): a broker's
CPU when its port opens 3.1-3.45 -> 1.5-1.7 CPU-s; `StorageTool format` 1.38 -> 0.85. The
test suite formats and starts about a hundred Kafka JVMs; on two cores that is a minute.

Java 17 has no `-XX:+AutoCreateSharedArchive` (JDK 19), so the archive is made once per
version and Java by starting one loopback KRaft node with `-XX:ArchiveClassesAtExit` and
stopping it (about 5 s; scripts/setup.sh does it for the default version, a run for any
other KRaft version the first time it is used). ZooKeeper-era versions get none. A JVM that
cannot use an archive (other jars, another Java build) runs without it, and says nothing
(`-Xlog:cds=off`): the archive only ever saves time.
"""
from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from systems.daemons import free_loopback_port
from systems.kafka import install

# Two cores run four JVMs: the serial collector keeps each JVM to one GC thread, and the JIT
# stops at C1: C2's compilations cost a broker 2-3 of its 5-7 CPU-s to start (measured
# 2026-11-28, KRaft combined node of 4.1.1, CPU 10 s after its port opened: 7 and 5 s with C2,
# 3 and 4 s with C1 only), which a 2-core machine running four brokers and the workload pays
# in timeouts; the harness's workloads are hundreds of ops a second, far below what C1 code serves.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=2", "-Djava.awt.headless=true",
             "-Dlog4j2.disable.jmx=true"]


def new_cluster_id() -> str:
    """Kafka's cluster id: 16 random bytes, URL-safe base64 without padding (22 characters),
    never starting with '-' (as Kafka's Uuid.randomUuid: StorageTool's argument parser takes
    `-t -abc...` for an option and fails the format, 1 run in 64)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
TRAIN_TIMEOUT = 120.0


def archive_path(version: str, java: str = "java") -> Path:
    """Where the archive of `version` for this `java` lives: beside the version's lib/,
    named by the Java binary (its real path, size and time: a JDK upgraded in place is another)."""
    binary = os.path.realpath(shutil.which(java) or java)
    try:
        st = os.stat(binary)
        ident = f"{binary}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        ident = binary
    digest = hashlib.sha1(ident.encode()).hexdigest()[:10]
    return install.lib_dir(version).parent / f"classes-{digest}.jsa"


def archive_flags(version: str, java: str = "java") -> list[str]:
    """The flags that map the archive, or none when there is no archive."""
    path = archive_path(version, java)
    return [f"-XX:SharedArchiveFile={path}", *QUIET] if path.is_file() else []


def ensure_archive(version: str, java: str = "java") -> Path | None:
    """The archive of `version` for `java`, made now if missing (one process at a time: a
    lock beside it); None for a ZooKeeper-era version or when making it failed (then the
    brokers simply start without it; the reason is one line on stderr)."""
    if install.zk_era(version) or not install.have_jars(version) or shutil.which(java) is None:
        return None   # (no Java here: the run's own check says so, in its words)
    path = archive_path(version, java)
    if path.is_file():
        return path
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return path
        try:
            why = _train(version, java, path)
        except (OSError, subprocess.SubprocessError) as err:
            why = f"{type(err).__name__}: {err}"
    if why:
        print(f"kafka: no class-data archive for {version} ({why}); brokers start without it", file=sys.stderr)
        return None
    return path


def _train(version: str, java: str, path: Path) -> str | None:
    """Format and start one KRaft combined node on loopback with -XX:ArchiveClassesAtExit,
    wait until it serves, stop it (the JVM writes the archive as it exits). The reason
    when no archive came out, else None."""
    classpath = os.path.join(str(install.lib_dir(version)), "*")
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-cds-") as tmp:
        port, ctl = free_loopback_port(), free_loopback_port()
        props = Path(tmp) / "server.properties"
        props.write_text("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{ctl}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER", f"log.dirs={tmp}/data",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", ""]))
        java_cmd = [java, "-Xmx256m", *JVM_FLAGS, "-cp", classpath]
        fmt = subprocess.run([*java_cmd, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(),
                              "-c", str(props)], capture_output=True, text=True, timeout=TRAIN_TIMEOUT)
        if fmt.returncode != 0:
            return f"StorageTool format exited {fmt.returncode}"
        with open(Path(tmp) / "broker.log", "w") as out:
            broker = subprocess.Popen([*java_cmd[:1], f"-XX:ArchiveClassesAtExit={partial}", *java_cmd[1:],
                                       "kafka.Kafka", str(props)], stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + TRAIN_TIMEOUT
            while time.monotonic() < deadline and broker.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.2)
            else:
                return "the training broker did not open its port"
            time.sleep(1.0)   # the first metadata and group-coordinator classes load just after
            broker.send_signal(signal.SIGTERM)
            broker.wait(timeout=TRAIN_TIMEOUT)
        finally:
            if broker.poll() is None:
                broker.kill()
                broker.wait()
    if not partial.is_file():
        return "the JVM wrote no archive at exit"
    os.replace(partial, path)
    return None


if __name__ == "__main__":   # systems/kafka/setup.sh: `python -m systems.kafka.jvm VERSION`
    if not archive_path(sys.argv[1]).is_file() and ensure_archive(sys.argv[1]):
        print(f"setup: Kafka {sys.argv[1]} class-data archive "
              f"{archive_path(sys.argv[1]).relative_to(install.REPO)} (systems/kafka/jvm.py)", file=sys.stderr)

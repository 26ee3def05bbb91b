"""`harness run --sut kafka --option client=java` end to end, as a user runs it (a
subprocess, a real KRaft cluster on netns, the run's one client JVM): a short run
under broker kills ends with a verdict, test.json and the report name the client
and its version; the client JVM, stopped and then SIGKILLed mid-run from outside,
ends every op it had in flight (a send is `info`, its process never used again),
the run goes on in a new JVM (its ops answered), and no JVM is left once the run is over."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.hrun_util import harness_cmd, harness_env, read_history
from tests.kafka.kafkautil import need_root

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(600)]
SUBNET = "10.221.38.0/24"
MAIN = "ReplogKafkaClient"


def _client_jvms(parent: int) -> list[int]:
    """Client JVMs whose parent is the harness process."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == parent and MAIN.encode() in cmd and stat[0] != "Z":
            found.append(int(d.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return stat[0] != "Z" and MAIN.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def run_killing_the_client_jvm(tmp_path, argv: list, f: str, at_least: int, timeout: float = 300):
    """`harness <argv>` as a subprocess; once the history has `at_least` invocations of `f`,
    the run's client JVM is SIGSTOPped (the ops invoked then wait on it: in flight), and a
    second later SIGKILLed. -> (returncode, stdout, stderr, the killed pid or None, the
    history's length at the kill, every client JVM seen)."""
    proc = subprocess.Popen(harness_cmd(*argv), cwd=tmp_path, env=harness_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    killed, killed_at = None, None
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            jvms = _client_jvms(proc.pid)
            seen.update(jvms)
            running = [d for d in (tmp_path / "s").glob("*/*") if d.is_dir() and not d.is_symlink()]
            if killed is None and jvms and running and (running[0] / "history.jsonl").exists():
                ops = read_history(running[0])
                if sum(o["type"] == "invoke" and o["f"] == f for o in ops) >= at_least:
                    killed = jvms[0]
                    os.kill(killed, signal.SIGSTOP)
                    time.sleep(1.0)
                    killed_at = len(read_history(running[0]))
                    os.kill(killed, signal.SIGKILL)
            time.sleep(0.2)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err, killed, killed_at, seen


def test_a_java_client_run_survives_its_jvm_killed_and_ends_with_a_verdict(tmp_path):
    need_root()
    returncode, out, err, killed, killed_at, seen = run_killing_the_client_jvm(
        tmp_path, ["run", "--sut", "kafka", "--option", "client=java", "--nemesis", "kill", "--nemesis-interval",
                   "5", "--time-limit", "20", "--seed", "3", "--subnet", SUBNET, "--store", tmp_path / "s"],
        "send", 10)   # the workload is sending
    assert killed is not None, f"the run's client JVM never showed ({seen}): {err[-3000:]}"
    assert returncode in (0, 1), err[-3000:]
    store = Path(out.strip().splitlines()[-1])
    results = json.loads((store / "results.json").read_text())
    assert results["valid"] in (True, False)
    test = json.loads((store / "test.json").read_text())
    assert test["system_options"]["client"] == "java" and test["system_options"]["client_version"] == "4.1.1"
    assert "client=java" in (store / "report.html").read_text()

    ops = read_history(store)
    lost = [o for o in ops if o["type"] != "invoke" and "client JVM exited" in str(o.get("error"))]
    assert lost, "the ops in flight at the kill name the JVM's exit"
    assert all(o["type"] == "info" for o in lost if o["f"] == "send"), lost
    assert any(o["f"] == "send" for o in lost), lost
    for o in lost:
        if o["type"] == "info":   # Jepsen's rule: a process whose op is indefinite is never used again
            later = [p for p in ops if p["process"] == o["process"] and p["index"] > o["index"]]
            assert not later, (o, later[:2])
    # a poll or a send the new JVM answered (a send may wait out the broker kills: acks=all waits
    # for a killed follower until it leaves the ISR)
    after = [o for o in ops[killed_at:] if o["type"] == "ok" and o["process"] != "nemesis"]
    assert after, "the run went on in a new client JVM"
    assert len(seen) >= 2, f"a new JVM after the kill: {seen}"
    assert not [p for p in seen if _alive(p)], "no client JVM outlives the run"


def test_a_client_version_maven_does_not_serve_is_one_line_exit_2_before_any_host(tmp_path):
    out = subprocess.run(harness_cmd("run", "--sut", "kafka", "--option", "client=java", "--option",
                                     "client_version=4.1.99", "--time-limit", "5", "--store", tmp_path / "s"),
                         cwd=tmp_path, env=harness_env(tmp_path), capture_output=True, text=True, timeout=300)
    errors = [line for line in out.stderr.splitlines() if line.startswith("harness: error:")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "Maven Central does not serve org.apache.kafka:kafka-clients:4.1.99" in errors[0]
    assert "client_version=" in errors[0] and len(errors[0]) < 300
    assert not list((tmp_path / "runs").glob("*.json"))

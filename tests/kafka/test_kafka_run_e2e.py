"""`harness run --sut kafka` end to end, as a user runs it (a subprocess, a
real KRaft cluster on netns): a verdict with results.json, Kafka's leaders,
epochs and ISR in the samples and the report's plots, every broker's dump,
under every fault Kafka supports; and after a SIGKILLed run,
`harness cleanup` leaves no JVM, FUSE mount, namespace or rule."""
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.hnetns_util import leftovers
from tests.harness.hrun_util import harness_cmd, harness_env, run_harness
from tests.kafka.kafkautil import need_root

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(600)]


def _store(out: subprocess.CompletedProcess) -> Path:
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr[-3000:]
    return Path(lines[-1])


def test_run_with_every_fault_ends_with_a_verdict_and_kafka_in_the_report(tmp_path):
    """One run with every fault Kafka supports (one cluster start for all of them: the
    suite's time): a verdict, every broker's dump, Kafka's state in the samples and report.
    30 s: at a load of 15 a fault's start and heal took long enough that 18 s drew one fault."""
    need_root()
    out = run_harness(tmp_path, "run", "--sut", "kafka", "--nemesis", "kill,pause,partition,power,corrupt,packet",
                      "--nemesis-interval", "3", "--time-limit", "30", "--seed", "5", "--subnet", "10.221.9.0/24",
                      "--store", tmp_path / "s", timeout=500)
    store = _store(out)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    results = json.loads((store / "results.json").read_text())
    assert results["valid"] in (True, False)
    assert results["checkers"]["replica-diff"]["valid"] in (True, False)   # every broker's dump was read
    for node in ("n1", "n2", "n3"):
        dump = json.loads((store / "nodes" / node / "dump.json").read_text())
        assert {p["partition"] for p in dump["partitions"]} == {0, 1, 2}
        assert (store / "nodes" / node / "kafka.log").is_file()
    faults = {json.loads(l)["f"] for l in (store / "history.jsonl").read_text().splitlines()
              if json.loads(l)["process"] == "nemesis"}
    assert {"power", "corrupt", "packet"} & faults and {"kill", "pause", "partition"} & faults, faults
    parts = [p for line in (store / "samples.jsonl").read_text().splitlines()
             for p in json.loads(line)["state"]["partitions"]]
    assert {p["leader"] for p in parts} & {"n1", "n2", "n3"}
    assert all(p["leader_epoch"] is not None for p in parts)
    assert any(len(p["isr"]) == 3 for p in parts if p["role"] == "leader")
    assert any(p["leo"] and p["hw"] is not None for p in parts)
    page = (store / "report.html").read_text()
    # the plots are of the partitions an anomaly names, or of the first ones when none does
    assert re.search(r'id="replica-\d+"', page), "no partition's LEO/HW plot"
    # the configured rate (100 ops/s by default) beside what the clients invoked outside faults
    assert re.search(r'<p id="rate-held" class="meta">rate (held|not held): \d+\.\d ops/s of 100 configured '
                     r'outside fault windows', page), "no rate figure"
    if "partition" in faults:   # the seed draws from six faults; a partition is not certain
        assert "topology-plot" in page
    else:
        assert "The nemesis applied no network partition" in page
    assert not list((tmp_path / "runs").glob("*.json")), "run record left behind"


def _jvms(marker: str) -> list[str]:
    """Kafka JVMs whose command line names marker (-ww: whole lines, whatever COLUMNS says)."""
    ps = subprocess.run(["ps", "-eww", "-o", "pid,args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines() if "kafka.Kafka" in l and marker in l]


def test_sigkill_then_cleanup_leaves_no_jvm_mount_namespace_or_rule(tmp_path):
    need_root()
    proc = subprocess.Popen(harness_cmd("run", "--sut", "kafka", "--nemesis", "power,partition",
                                        "--nemesis-interval", "3", "--time-limit", "120", "--seed", "2",
                                        "--subnet", "10.221.11.0/24", "--store", tmp_path / "s"),
                            cwd=tmp_path, env=harness_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    store = None
    while time.monotonic() < deadline:
        running = [d for d in (tmp_path / "s").glob("*/*") if d.is_dir() and not d.is_symlink()]
        hist = running[0] / "history.jsonl" if running else None
        if hist is not None and hist.exists():
            ops = [json.loads(line) for line in hist.read_text().splitlines() if line.strip()]
            if sum(o["type"] == "ok" for o in ops) > 20 and any(o["process"] == "nemesis" for o in ops):
                store = running[0]
                break
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.communicate()[1][-2000:]}")
        time.sleep(0.5)
    if store is None:
        proc.kill()
        raise AssertionError("the run did not get to its first fault")
    run_id = json.loads((store / "test.json").read_text())["run_id"]
    work = str(tmp_path / "work" / run_id)
    running_jvms = _jvms(work)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert running_jvms, "the run's brokers must be running before the kill"
    assert leftovers(run_id) and _jvms(work)
    out = run_harness(tmp_path, "cleanup")
    assert out.returncode == 0, out
    assert leftovers(run_id) == [] and _jvms(work) == []
    assert work not in Path("/proc/mounts").read_text()
    assert not Path(work).exists()


def test_bad_kafka_input_is_one_line_exit_2_before_any_host(tmp_path):
    """A misspelt setting, a version Maven Central does not serve, a pre-KRaft
    version: one line naming the fix, exit 2, no run record or host left."""
    cases = [(["--set", "segmnt.bytes=1048576"], "did you mean 'segment.bytes'"),
             (["--option", "version=4.1.99"], "Maven Central does not serve Kafka 4.1.99"),
             (["--option", "version=3.8.1"], "4.0.0 or later on KRaft"),  # 3.9.x runs (KRaft)
             (["--nemesis", "clock"], "does not support 'fault clock'")]
    for args, text in cases:
        out = run_harness(tmp_path, "run", "--sut", "kafka", "--time-limit", "5", "--store", tmp_path / "s",
                          *args, timeout=300)
        errors = [line for line in out.stderr.splitlines() if line.startswith("harness: error:")]
        assert out.returncode == 2 and len(errors) == 1 and text in errors[0], (args, out.stderr[-2000:])
        assert not list((tmp_path / "runs").glob("*.json"))
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())

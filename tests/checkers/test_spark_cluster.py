"""The checkers on a real Spark standalone cluster (a master and a worker on
127.0.0.1, started from the installed pyspark): `harness campaign check` with
`--master spark://127.0.0.1:PORT` gives the results the in-process engine gives, and the
test leaves nothing running."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.linearizability import same_verdicts
from checkers.check_store import check_store
from tests.checkers import log_dumps, log_histories
from history.formats import read_history
from tests.checkers.spark_cluster import StandaloneCluster
from tests.checkers.test_store import make_store
from tests.checkers.txn_cases import path as txn_case

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]  # a cluster, a Spark job and local[2] on a loaded 2-core machine

REPO = Path(__file__).resolve().parents[2]
RUNS = {"clean": (log_histories.clean, log_dumps.agreeing),
        "lost-write": (log_histories.lost_write, log_dumps.divergent),
        "read-then-lost": (log_histories.read_then_lost, log_dumps.lost_acknowledged),
        "interrupted": (log_histories.interrupted, log_dumps.agreeing)}


def campaign_root(root: Path) -> Path:
    for name, (history, dumps) in RUNS.items():
        make_store(root / "log" / name, history().ops, dumps())
    # transactions: the txn checker's per-key step runs in the executors' Python workers
    make_store(root / "queue" / "G1c", read_history(txn_case("G1c")), {})
    return root


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def executor_logs(folder: Path, tail: int = 4000) -> str:
    """The last lines of every executor's stderr (the Python workers' tracebacks), for a failure."""
    return "".join(f"\n--- {log}\n" + log.read_text(errors="replace")[-tail:]
                   for log in sorted(folder.glob("worker-*/app-*/*/stderr")))


def test_a_standalone_cluster_checks_a_campaign_like_local(tmp_path):
    on_cluster = campaign_root(tmp_path / "cluster")
    shutil.copytree(on_cluster, tmp_path / "local")
    cluster = StandaloneCluster(tmp_path / "spark", workers=1, cores=2)  # one executor JVM: the suite's time
    (tmp_path / "spark").mkdir()
    cluster.start()
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1")
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "campaign", "check", str(on_cluster),
                               "--master", cluster.url], capture_output=True, text=True, env=env,
                              timeout=900)
        log = (tmp_path / "spark" / "master.log").read_text(errors="replace")
    finally:
        cluster.stop()
    assert proc.returncode == 2, proc.stdout + proc.stderr  # the interrupted run is unknown
    assert "unknown" in proc.stdout and "campaign: the spark check failed" not in proc.stderr, \
        proc.stdout + proc.stderr + executor_logs(tmp_path / "spark")  # exit 2 for the interrupted run, not a failed job
    assert "Registering app" in log  # the job really ran on this cluster's executors
    for name in RUNS:  # against the in-process engine (local Spark = in-process: test_store_spark)
        remote = json.loads((on_cluster / "log" / name / "results.json").read_text())
        here = check_store(str(tmp_path / "local" / "log" / name))
        assert (remote["engine"], here["engine"]) == ("spark", "local")
        assert remote["valid"] == here["valid"], name
        assert same_verdicts(remote["checkers"]) == same_verdicts(here["checkers"]), name
    remote = json.loads((on_cluster / "queue" / "G1c" / "results.json").read_text())
    here = check_store(str(tmp_path / "local" / "queue" / "G1c"))
    assert remote["engine"] == "spark"  # results.json against the in-process result, both as JSON
    assert remote["checkers"]["txn"] == json.loads(json.dumps(here["checkers"]["txn"]))
    assert remote["checkers"]["txn"]["counts"]["G1c"] == 1
    assert not any(running(pid) for pid in cluster.pids())

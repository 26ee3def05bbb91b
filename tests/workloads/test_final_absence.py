"""A log gone after acknowledged writes, on the project's replica (real
controller and broker processes on netns), checked by `harness check`:

- the controller's metadata lost (every process stopped, the controller's
  state file removed, every process restarted; the brokers' partition
  folders stay, but no controller assigns them): the healthy cluster
  answers UNKNOWN_TOPIC_OR_PARTITION for the topic, a definite answer (harness.sut.AbsentError), so the final
  phase settles at once and every acknowledged send is lost-write, exit 1;
- every replica's partition directory of key 0 deleted (brokers stopped,
  restarted): the controller still names the partition and its leader, and
  the brokers recreate an empty log; the final reads read it to its end
  (0), so every acknowledged send is an anomaly (unseen), exit 1, and not
  "unknown": the reads completed. (No definite absence here: the log exists,
  empty.)
"""
from __future__ import annotations

import asyncio
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from hnetns_util import leftovers, needs_root, new_run_id  # noqa: E402

pytestmark = [pytest.mark.root, needs_root, pytest.mark.timeout(240)]

from harness import registry  # noqa: E402
from harness.cleanup import RunRecord  # noqa: E402
from harness.cluster.netns import NetnsCluster  # noqa: E402
from harness.sut import RunShape  # noqa: E402
from replica import storage  # noqa: E402
from replica.controller_process import STATE_FILE  # noqa: E402
from tests.workloads.absence_util import gone_run, harness_check  # noqa: E402

SETTINGS = {"min.insync.replicas": 2, "replica.lag.time.max.ms": 3000, "broker.session.timeout.ms": 3000,
            "broker.heartbeat.interval.ms": 250}


@contextmanager
def replica_cluster(tmp_path, subnet: str):
    run_id = new_run_id()
    rec = RunRecord(run_id, run_dir=tmp_path / "runs")
    cluster = NetnsCluster(run_id, 3, subnet, rec, str(tmp_path / "work"))
    try:
        cluster.create()
        system = registry.system("replica")
        db = system.make_db(cluster, system.host_plan(3), RunShape(3, 2, 3, SETTINGS),
                            system.parse_options({"era": "epoch"}))
        db.setup()
        try:
            yield cluster, db
        finally:
            db.teardown()
    finally:
        cluster.destroy()
        rec.remove_file()
    assert leftovers(run_id) == []


def test_a_topic_the_controller_forgot_is_lost_write_and_exit_1(tmp_path):
    with replica_cluster(tmp_path, "10.212.2.0/24") as (cluster, db):
        async def forget_topic():
            def do():
                for host in (db.controller, *db.nodes):
                    db.process.kill(host)
                os.remove(os.path.join(db.data_dir(db.controller), STATE_FILE))
                for host in (db.controller, *db.nodes):
                    db.process.start(host)
            await asyncio.to_thread(do)

        final, took = gone_run(cluster, db, tmp_path / "store", forget_topic, "replica", recovery_timeout=60)
    assert final["healthy"] is True and final["complete"] is True, final
    assert set(final["absent"]) == {"0", "1"} and all("UNKNOWN_TOPIC_OR_PARTITION" in v
                                                       for v in final["absent"].values())
    assert took < 30, f"the final phase waited {took:.1f}s for a topic the controller says does not exist"
    code, results, out = harness_check(tmp_path / "store")
    assert code == 1, out
    log = results["checkers"]["log"]
    assert log["counts"]["lost-write"] == 25 and log["counts"]["unseen"] == 0, log["counts"]
    assert set(log["absent"]) == {"0", "1"}


def test_partition_directories_deleted_on_every_replica_are_an_anomaly_not_unknown(tmp_path):
    with replica_cluster(tmp_path, "10.212.3.0/24") as (cluster, db):
        async def delete_dirs():
            def do():
                for n in db.nodes:
                    db.process.kill(n)
                for n in db.nodes:
                    shutil.rmtree(os.path.join(db.data_dir(n), storage.partition_dir_name("log", 0)))
                for n in db.nodes:
                    db.process.start(n)
            await asyncio.to_thread(do)

        final, took = gone_run(cluster, db, tmp_path / "store", delete_dirs, "replica")
    assert final["complete"] is True and "absent" not in final, final
    assert final["keys"]["0"]["read_to"] == 0 and final["keys"]["1"]["read_to"] == 5
    code, results, out = harness_check(tmp_path / "store")
    assert code == 1, out
    counts = results["checkers"]["log"]["counts"]
    assert counts["unseen"] + counts["lost-write"] == 20, counts

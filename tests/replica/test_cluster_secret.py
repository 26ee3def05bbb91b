"""Cluster identity (issue 15, defect 5): only brokers holding the cluster's
secret act as followers, register, or change the ISR (Kafka's ClusterAction).
A client that poses as a follower is served as a consumer."""

import asyncio
import signal
import subprocess
import sys

import pytest

from cluster_fixture import REPO, free_port
from replica.client import ClientError


TOPIC = "log"


async def posing_follower(address, replica_id, offset, stop: asyncio.Event):
    """Fetch as follower ``replica_id`` at ``offset`` (without the secret) until ``stop``."""
    reader, writer = await asyncio.open_connection(*address)
    from replica.wire import encode_frame, read_frame
    corr = 0
    try:
        while not stop.is_set():
            corr += 1
            writer.write(encode_frame({"api": "Fetch", "corr": corr, "topic": TOPIC, "partition": 0,
                                       "offset": offset, "replica_id": replica_id, "max_wait_ms": 100}))
            await writer.drain()
            await asyncio.wait_for(read_frame(reader), 5)
    finally:
        writer.close()


@pytest.mark.timeout(120)
@pytest.mark.root
def test_a_client_posing_as_followers_does_not_commit_writes(local_cluster):
    """Both real followers are stopped; a client fetches as replicas 2 and 3 at
    the leader's LEO. The acks=all write must not be acknowledged (the HW stays)."""
    cluster = local_cluster(brokers=3, settings={"replica.lag.time.max.ms": 60000})

    async def scenario():
        async with cluster.client(request_timeout=3.0) as client:
            await cluster.wait_registered(client)
            await client.create_topic(TOPIC, partitions=1, replication_factor=3,
                                      config={"min.insync.replicas": 2})
            leader = (await client.wait_for_leaders(TOPIC))[0]["leader"]
            assert await client.produce(TOPIC, 0, "committed", acks="all") == 0
            followers = [b for b in cluster.broker_ids if b != leader]
            for b in followers:
                cluster.signal(b, signal.SIGSTOP)
            stop = asyncio.Event()
            posers = [asyncio.create_task(posing_follower(cluster.addresses[leader], b, 2, stop))
                      for b in followers]
            try:
                try:
                    outcome = await client.produce(TOPIC, 0, "never replicated", acks="all")
                except ClientError as e:
                    outcome = e.code
                stop.set()
                await asyncio.gather(*posers, return_exceptions=True)
                # The leader's state while the real followers are still stopped: once resumed
                # they fetch the write and commit it, as they should (on a loaded machine
                # they did so before a read made after the resume).
                state = await client.state(leader)
            finally:
                stop.set()
                await asyncio.gather(*posers, return_exceptions=True)
                for b in followers:
                    cluster.signal(b, signal.SIGCONT)
            return outcome, next(p for p in state["partitions"] if p["topic"] == TOPIC)

    outcome, part = asyncio.run(scenario())
    assert outcome == "REQUEST_TIMED_OUT", f"acks=all write acknowledged without its replicas: {outcome}"
    assert part["hw"] == 1 and part["leo"] == 2


@pytest.mark.timeout(120)
@pytest.mark.root
def test_controller_and_brokers_refuse_cluster_requests_without_the_secret(local_cluster):
    cluster = local_cluster(brokers=2)

    async def scenario():
        async with cluster.client() as client:
            await cluster.wait_registered(client)
            await client.create_topic(TOPIC, partitions=1, replication_factor=2)
            meta = (await client.wait_for_leaders(TOPIC))[0]
            ctl = cluster.controller_address
            answers = {
                "register": await client.call(ctl, "Register", broker=7, host="127.0.0.1", port=1),
                "alter isr": await client.call(ctl, "AlterIsr", broker=meta["leader"], broker_epoch=1,
                                               topic=TOPIC, partition=0, leader_epoch=meta["leader_epoch"],
                                               isr=[meta["leader"]], version=meta["version"]),
                "isr change": await client.call(ctl, "IsrChangeNotification", broker=1,
                                                partitions=[[TOPIC, 0]]),
                "heartbeat": await client.call(ctl, "Heartbeat", broker=1, broker_epoch=1),
                "leader and isr": await client.call(
                    cluster.addresses[meta["leader"]], "LeaderAndIsr", seq=99, brokers={}, partitions=[
                        {"topic": TOPIC, "partition": 0, "leader": None, "leader_epoch": 99, "isr": [],
                         "replicas": [1, 2], "version": 99, "config": {}}]),
            }
            after = (await client.metadata(TOPIC))[0]
            return answers, meta, after

    answers, before, after = asyncio.run(scenario())
    assert {k: a["error"] for k, a in answers.items()} == {k: "CLUSTER_AUTHORIZATION_FAILED" for k in answers}
    assert after["isr"] == before["isr"] and after["leader"] == before["leader"]


@pytest.mark.unit
@pytest.mark.parametrize("secret", [None, ""])
def test_processes_refuse_to_start_without_a_secret(tmp_path, secret):
    argv = [sys.executable, "-m", "replica.controller_process", "--listen", f"127.0.0.1:{free_port()}",
            "--data-dir", str(tmp_path / "ctl"), "--era", "epoch"]
    if secret is not None:
        (tmp_path / "secret").write_text(secret)
        argv += ["--cluster-secret-file", str(tmp_path / "secret")]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=30,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "--cluster-secret-file" in lines[0], proc.stderr

"""A real nats-server cluster on netns for the adapter tests, and a way to
run client coroutines inside its client namespace (setns is per thread)."""
from __future__ import annotations

import asyncio
import os
import secrets

import pytest

from harness.cleanup import RunRecord, release
from tests.harness.hnetns_util import in_client_thread
from harness.cluster.netns import NetnsCluster
from harness.sut import RunShape
from systems.nats import SYSTEM


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")


class NatsCluster:
    def __init__(self, subnet: str, nodes: int = 3, keys: int = 2, tmp=None, **options):
        self.rid = secrets.token_hex(3)
        self.record = RunRecord(self.rid, run_dir=(tmp / "runs") if tmp else None)
        self.record.save()
        self.cluster = NetnsCluster(self.rid, nodes, subnet, self.record, str((tmp or "/var/tmp/harness") / "work")
                                    if tmp else f"/var/tmp/harness/{self.rid}")
        self.shape = RunShape(nodes=nodes, keys=keys, replication_factor=min(3, nodes))
        self.db = None
        self.options = options

    def __enter__(self):
        self.cluster.create()
        self.db = SYSTEM.make_db(self.cluster, SYSTEM.host_plan(self.shape.nodes), self.shape,
                                 SYSTEM.parse_options(self.options))
        return self

    def __exit__(self, *exc):
        try:
            if self.db is not None:
                self.db.teardown()
        finally:
            self.cluster.destroy()
            release(self.record)
            self.record.remove_file()

    def run(self, coro_fn, *args):
        """coro_fn(*args) in a fresh event loop in a thread inside the client namespace."""
        return in_client_thread(self.cluster, coro_fn, *args)


async def until(fn, timeout: float = 30.0, period: float = 0.25):
    """Await fn() until it returns a truthy value; that value (AssertionError on timeout)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = None
    while loop.time() < deadline:
        try:
            last = await fn()
            if last:
                return last
        except Exception as e:  # not ready yet
            last = e
        await asyncio.sleep(period)
    raise AssertionError(f"not reached in {timeout}s: {last!r}")


async def log_ready(db, keys: int = 2, replication_factor: int = 3, timeout: float = 30.0) -> None:
    """Create the log (retrying while the system starts) and wait until every
    key has a leader and a full ISR."""
    client = db.client()

    async def create():
        await client.create(keys, replication_factor, {})
        return True
    try:
        await until(create, timeout=timeout)
        await until(lambda: healthy(client, keys, replication_factor), timeout=timeout)
    finally:
        await client.close()


async def healthy(client, keys: int = 2, replication_factor: int = 3) -> bool:
    """Every key has a leader and all its replicas in sync."""
    meta = await client.metadata()
    return len(meta) == keys and all(m.leader and len(m.isr) == replication_factor for m in meta.values())

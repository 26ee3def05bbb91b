"""A NATS stream deleted by hand after acknowledged publishes is a lost log:
the final phase takes the healthy cluster's "stream not found" (JetStream
10059) as definite, at once, and `harness check` says lost-write, exit 1 --
not "unknown", exit 2, as it did when that answer counted as reads that did
not complete. Real nats-server (Debian's) and nats-py on netns."""
from __future__ import annotations

import nats
import pytest

from tests.nats.natsutil import NatsCluster, need_root
from tests.workloads.absence_util import gone_run, harness_check

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_a_stream_deleted_by_hand_is_lost_write_and_exit_1(tmp_path):
    need_root()
    with NatsCluster("10.212.1.0/24", keys=2, tmp=tmp_path) as c:
        c.db.setup()

        async def delete_stream():
            nc = await nats.connect(c.db.servers(), connect_timeout=2)
            try:
                await nc.jetstream(timeout=5).delete_stream("log-0")
            finally:
                await nc.close()

        final, took = gone_run(c, c.db, tmp_path / "store", delete_stream, "nats")
    assert final["healthy"] is True and final["complete"] is True
    assert set(final["absent"]) == {"0"} and "10059" in final["absent"]["0"]
    assert final["keys"]["1"]["read_to"] == 5 and "absent" not in final["keys"]["1"]
    assert took < 15, f"the final phase waited {took:.1f}s for a stream the cluster says is gone"

    code, results, out = harness_check(tmp_path / "store")
    assert code == 1, out
    log = results["checkers"]["log"]
    assert log["valid"] is False
    assert log["counts"]["lost-write"] == 20 and log["counts"]["unseen"] == 0
    assert log["absent"] == {"0": final["absent"]["0"]}
    examples = log["examples"]["lost-write"]
    assert [e["offset"] for e in examples] == list(range(20)) and all(e["key"] == 0 for e in examples)
    assert all(e["absent"] and len(e["ops"]) == 2 for e in examples)   # the ack and the poll that found it gone

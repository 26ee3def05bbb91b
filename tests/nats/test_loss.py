"""The checkers see real loss on this real system: a stream with one replica
in memory loses every acknowledged write when its node is killed and
restarted, and the history says so (lost-write for the writes below later
offsets, or unseen, each with its acknowledging op; the new writes reuse the
old offsets, so inconsistent-offsets too)."""
from tests.nats.kill_restart import run_once
from tests.nats.natsutil import need_root
import pytest

pytestmark = pytest.mark.root


def test_memory_storage_one_replica_loses_acknowledged_writes(tmp_path):
    need_root()
    out = run_once("10.221.3.0/24", replicas=1, storage="memory", work=tmp_path)
    assert out["sends"]["ok"] == 30 and len(out["victims"]) == 1
    assert out["valid"] is False
    lost = out["counts"].get("lost-write", 0) + out["counts"].get("unseen", 0)
    assert lost == 20, out["counts"]
    example = (out["examples"].get("lost-write") or out["examples"]["unseen"])[0]
    assert example["key"] == 0 and example["ops"], example  # names the acknowledging op
    assert out["counts"].get("inconsistent-offsets", 0) == 10  # offsets 0..9 were given out twice

"""Checkpoints written off the event loop: in order, the same bytes as a direct
write, unchanged content skipped, and a failed write retried by the next one."""

import os

from replica import storage as S
import pytest

pytestmark = pytest.mark.unit


def test_writes_in_order_and_skips_unchanged(tmp_path):
    path = str(tmp_path / "replication-offset-checkpoint")
    writer = S.CheckpointWriter()
    try:
        futures = [writer.submit(S.write_offset_checkpoint, path, {("log", 0): hw}) for hw in range(50)]
        assert all(f is not None for f in futures)
        assert writer.submit(S.write_offset_checkpoint, path, {("log", 0): 49}) is None   # unchanged
        writer.drain()
        assert S.read_offset_checkpoint(path) == {("log", 0): 49}       # the last one won
        direct = str(tmp_path / "direct")
        S.write_offset_checkpoint(direct, {("log", 0): 49})
        assert open(path, "rb").read() == open(direct, "rb").read()
        assert not os.path.exists(path + ".tmp")
    finally:
        writer.close()


def test_failed_write_is_reported_and_not_skipped_next_time(tmp_path):
    errors = []
    missing = str(tmp_path / "no-such-dir" / "replication-offset-checkpoint")
    writer = S.CheckpointWriter(on_error=errors.append)
    try:
        writer.submit(S.write_offset_checkpoint, missing, {("log", 0): 1})
        writer.drain()
        assert errors and "no-such-dir" in errors[0]
        os.makedirs(os.path.dirname(missing))
        assert writer.submit(S.write_offset_checkpoint, missing, {("log", 0): 1}) is not None
        writer.drain()
        assert S.read_offset_checkpoint(missing) == {("log", 0): 1}
    finally:
        writer.close()


def test_close_finishes_queued_writes(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    writer = S.CheckpointWriter()
    for offset in range(20):
        writer.submit(S.write_offset_checkpoint, path, {("log", 0): offset, ("log", 1): 2 * offset})
    writer.close()
    assert S.read_offset_checkpoint(path) == {("log", 0): 19, ("log", 1): 38}

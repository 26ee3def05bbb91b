"""Checkpoint files: Kafka's exact text format, atomic replacement, strict readers."""

import os

import pytest

from replica.storage import (
    CheckpointError, read_leader_epoch_checkpoint, read_offset_checkpoint,
    write_leader_epoch_checkpoint, write_offset_checkpoint,
)

pytestmark = pytest.mark.unit


def test_offset_checkpoint_exact_bytes_and_round_trip(tmp_path):
    path = str(tmp_path / "replication-offset-checkpoint")
    offsets = {("log", 2): 7, ("log", 0): 118, ("other", 1): 0}
    write_offset_checkpoint(path, offsets)
    assert open(path, "rb").read() == b"0\n3\nlog 0 118\nlog 2 7\nother 1 0\n"
    assert read_offset_checkpoint(path) == offsets
    assert not os.path.exists(path + ".tmp")


def test_leader_epoch_checkpoint_exact_bytes_and_round_trip(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    write_leader_epoch_checkpoint(path, [(0, 0), (3, 100)])
    assert open(path, "rb").read() == b"0\n2\n0 0\n3 100\n"
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (3, 100)]
    write_leader_epoch_checkpoint(path, [])
    assert open(path, "rb").read() == b"0\n0\n"
    assert read_leader_epoch_checkpoint(path) == []


def test_missing_file_is_empty(tmp_path):
    assert read_offset_checkpoint(str(tmp_path / "nope")) == {}
    assert read_leader_epoch_checkpoint(str(tmp_path / "nope")) == []


def test_rewrite_replaces_atomically(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offset_checkpoint(path, {("log", 0): 1})
    open(path + ".tmp", "w").write("stale half-written")
    write_offset_checkpoint(path, {("log", 0): 2})
    assert read_offset_checkpoint(path) == {("log", 0): 2}
    assert not os.path.exists(path + ".tmp")


@pytest.mark.parametrize("content, message", [
    ("", "version line"),
    ("1\n0\n", "unsupported version"),
    ("0\nx\n", "entry count"),
    ("0\n2\nlog 0 5\n", "header says 2"),
    ("0\n1\nlog 0\n", "3 space-separated fields"),
    ("0\n1\nlog  0 5\n", "3 space-separated fields"),
    ("0\n1\nlog 0 five\n", "not an integer"),
    ("0\n1\nlog 0 5 \n", "3 space-separated fields"),
    ("0\n2\nlog 0 5\nlog 0 6\n", "appears twice"),
    (b"0\n1\n\xff 0 5\n", "not UTF-8"),
])
def test_malformed_offset_checkpoint_raises_clear_error(tmp_path, content, message):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(CheckpointError, match=message) as info:
        read_offset_checkpoint(str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("content, message", [
    ("0\n1\n3\n", "2 space-separated fields"),
    ("0\n2\n3 100\n1 200\n", "not in epoch order"),
    ("0\n2\n1 200\n3 100\n", "not in epoch order"),
    ("0\n1\n1 1.5\n", "not an integer"),
])
def test_malformed_leader_epoch_checkpoint(tmp_path, content, message):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(content)
    with pytest.raises(CheckpointError, match=message):
        read_leader_epoch_checkpoint(str(path))


def test_writer_refuses_unwritable_topic(tmp_path):
    with pytest.raises(CheckpointError):
        write_offset_checkpoint(str(tmp_path / "c"), {("bad topic", 0): 1})

"""History writer and store layout."""
from __future__ import annotations

import json
import threading

import pytest

from history.writer import HistoryWriter
from harness.run_store import StoreError, create_run_dir, link_latest, validate_store

pytestmark = pytest.mark.unit


def test_history_is_flushed_op_by_op_and_dense(tmp_path):
    path = tmp_path / "history.jsonl"
    h = HistoryWriter(str(path))
    inv = h.invoke(0, "send", [0, 1])
    # readable before close: a crash now would lose nothing
    assert json.loads(path.read_text())["f"] == "send"

    def writer(p):
        for i in range(200):
            op = h.invoke(p, "poll", None)
            h.complete(op, "ok", {"0": [[i, i]]})

    threads = [threading.Thread(target=writer, args=(p,)) for p in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.complete(inv, "info", [0, 1], error="timeout")
    h.nemesis("kill", ["n2"])
    h.close()
    ops = [json.loads(l) for l in path.read_text().splitlines()]
    assert [o["index"] for o in ops] == list(range(len(ops)))
    assert len(ops) > 2 and all(a["time"] <= b["time"] for a, b in zip(ops, ops[1:]))
    assert ops[-1] == {**ops[-1], "process": "nemesis", "type": "info", "f": "kill", "value": ["n2"]}
    assert ops[-2]["error"] == "timeout" and ops[-2]["process"] == 0
    assert h.counts == {"invoke": 801, "ok": 800, "fail": 0, "info": 1}


def test_history_reads_back_with_the_checkers_reader(tmp_path):
    history = pytest.importorskip("history.formats")
    path = tmp_path / "history.jsonl"
    h = HistoryWriter(str(path))
    op = h.invoke(3, "poll", None)
    h.complete(op, "ok", {"2": [[0, 5]]})
    h.close()
    ops = history.read_history(str(path))
    assert ops[1]["value"] == {2: [[0, 5]]}


def test_store_layout_and_latest_links(tmp_path):
    a = create_run_dir(tmp_path, "log-epoch", when=1_700_000_000)
    b = create_run_dir(tmp_path, "log-epoch", when=1_700_000_000)
    assert a != b and a.parent == b.parent
    assert not (tmp_path / "latest").exists()  # linked only once a run's store is complete
    link_latest(b)
    assert (tmp_path / "log-epoch" / "latest").resolve() == b.resolve()
    assert (tmp_path / "latest").resolve() == b.resolve()
    assert (a / "nodes").is_dir()
    (b / "history.jsonl").write_text("")
    assert validate_store(tmp_path / "latest") == b.resolve()
    with pytest.raises(StoreError, match="not a store"):
        validate_store(a)

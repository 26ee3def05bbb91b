"""The log checker (both engines) on hand-written histories: a key whose final poll says
its log is gone loses every acknowledged send to it -- unread ones (the
kernels' unseen), ones read before (no anomaly in the kernels) and ones below
a read offset (already lost-write) -- and nothing else changes."""
from __future__ import annotations

import json

import pytest

from checkers.check_store import check_store



def _store(tmp_path, absent: bool):
    ops = []

    def op(process, type_, f, value, **extra):
        ops.append({"index": len(ops), "time": len(ops), "process": process, "type": type_, "f": f,
                    "value": value, **extra})

    for offset, (key, value) in enumerate([(0, 1), (0, 2), (0, 3)]):
        op(0, "invoke", "send", [key, value])
        op(0, "ok", "send", [key, [offset, value]])
    op(0, "invoke", "send", [1, 10])
    op(0, "ok", "send", [1, [0, 10]])
    op(1, "invoke", "poll", None)
    op(1, "ok", "poll", {"0": [[1, 2]]})          # value 2 read; value 1 (offset 0) below it: lost-write already
    op("nemesis", "info", "final", {"healed": True, "restarted": []})
    op(2, "invoke", "poll", None)
    if absent:
        op(2, "ok", "poll", {"0": []}, absent={"0": "NotFoundError: stream not found"})
    else:
        op(2, "ok", "poll", {"0": []})
    op(2, "invoke", "poll", None)
    op(2, "ok", "poll", {"1": [[0, 10]]})
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    (tmp_path / "test.json").write_text(json.dumps({"system": "nats", "keys": 2}))
    return tmp_path


@pytest.mark.unit
def test_every_acknowledged_send_to_a_gone_key_is_lost_write(tmp_path):
    log = check_store(str(_store(tmp_path, absent=True)))["checkers"]["log"]
    assert log["valid"] is False
    assert log["counts"]["lost-write"] == 3 and log["counts"]["unseen"] == 0
    assert log["absent"] == {"0": "NotFoundError: stream not found"} and log["lost_with_absent_logs"] == 2
    examples = log["examples"]["lost-write"]
    assert [(e["key"], e["offset"], e["value"]) for e in examples] == [(0, 0, 1), (0, 1, 2), (0, 2, 3)]
    assert [e.get("absent") is not None for e in examples] == [False, True, True]
    assert examples[1]["ops"][1] == 12          # the poll that found the stream gone


@pytest.mark.unit
def test_without_the_marker_the_kernels_verdict_stands(tmp_path):
    log = check_store(str(_store(tmp_path, absent=False)))["checkers"]["log"]
    assert log["counts"]["lost-write"] == 1 and log["counts"]["unseen"] == 1   # value 2 was read: no anomaly
    assert "absent" not in log


@pytest.mark.spark
@pytest.mark.timeout(1200)  # often the stream's first Spark test: the JVM's start and first check, on a loaded machine
def test_both_engines_count_a_gone_key_the_same(spark, tmp_path):
    """The absent column of the end rows is counted by the Spark driver as by the kernel,
    with and without the marker (both stores in one Spark job, as a campaign is checked).
    (`spark`: the shared session; a check that starts its own stops it, and every later
    Spark test of the run then fails with py4j errors.)"""
    from checkers.check_store import check_campaign

    stores = {absent: str(_store(tmp_path / str(absent), absent=absent)) for absent in (True, False)}
    local = {absent: check_store(store)["checkers"]["log"] for absent, store in stores.items()}
    remote = check_campaign(list(stores.values()))
    for absent, store in stores.items():
        assert remote[store]["engine"] == "spark"
        assert remote[store]["checkers"]["log"] == local[absent], absent
    assert local[True]["counts"]["lost-write"] == 3 and "absent" not in local[False]

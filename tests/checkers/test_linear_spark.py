"""The Spark driver runs the same per-key kernel and agrees with the local one."""
from __future__ import annotations

import pytest

from history.formats import read_history
from checkers.linear import check_ops
from tests.checkers.testdata import TESTDATA

pytestmark = pytest.mark.spark


pytest.importorskip("pyspark")


def comparable(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in ("engine", "seconds")}


def log_history(keys: int = 6) -> list[dict]:
    """Per key: two acknowledged sends and a poll; key 4's poll shows a lost write."""
    ops: list[dict] = []

    def add(p, kind, f, value):
        ops.append({"index": len(ops), "process": p, "type": kind, "f": f, "value": value})

    for key in range(keys):
        for offset, value in enumerate((key * 10, key * 10 + 1)):
            add(key, "invoke", "send", [key, value])
            add(key, "ok", "send", [key, [offset, value]])
    for key in range(keys):
        seen = [[0, key * 10], [1, key * 10 + 1 if key != 4 else -1]]
        add(100, "invoke", "poll", None)
        add(100, "ok", "poll", {key: seen})
    return ops


@pytest.fixture(scope="module")
def spark():
    from checkers.spark.session import spark_session

    return spark_session()


def test_spark_and_local_agree_on_a_multi_key_log_history(spark):
    ops = log_history()
    local = check_ops(ops, "log", engine="local")
    remote = check_ops(ops, "log", engine="spark")
    assert remote["engine"] == "spark"
    assert remote["valid"] is False and remote["invalid_keys"] == [4]
    assert comparable(remote) == comparable(local)


def test_spark_and_local_agree_on_a_knossos_history(spark):
    ops = read_history(TESTDATA / "knossos/cas-register/bad/rethink-fail-smaller.edn")
    local = check_ops(ops, "cas-register:0", engine="local")
    remote = check_ops(ops, "cas-register:0", engine="spark", time_limit=120)
    assert remote["valid"] is False
    assert comparable(remote) == comparable(local)

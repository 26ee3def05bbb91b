"""Every Knossos test history gets the verdict that expected.tsv gives.

Models as tests/data/README.md says: cas-register with initial
value 0 (the rethink-* files too), multi-register with {x 0, y 0}.  The
mutex file's verdict is recorded, not asserted (Knossos does not assert it).
"""
from __future__ import annotations

import csv
import json

import pytest

from history.formats import read_history
from checkers.linear import check_ops
from tests.checkers.testdata import TESTDATA

pytestmark = pytest.mark.unit

EXPECTED = TESTDATA / "knossos" / "expected.tsv"


def model_for(path: str) -> str:
    if "/cas-register/" in path:
        return "cas-register:0"
    if "/multi-register/" in path:
        return "multi-register:{:x 0 :y 0}"
    if "/mutex/" in path:
        return "mutex"
    raise AssertionError(f"no model for {path}")


def corpus() -> list[tuple[str, bool]]:
    with EXPECTED.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [(row["path"], row["valid"] == "true") for row in rows]


ASSERTED = [(p, v) for p, v in corpus() if not p.startswith("knossos/mutex/")]


def test_corpus_is_complete():
    assert len(ASSERTED) == 121  # 113 good + 7 bad cas-register, 1 multi-register


@pytest.mark.parametrize("path, valid", ASSERTED, ids=[p for p, _ in ASSERTED])
def test_knossos_history_verdict(path, valid):
    result = check_ops(read_history(TESTDATA / path), model_for(path))
    assert result["valid"] is valid, json.dumps(result)[:2000]
    if not valid:
        example = result["counterexample"]
        assert example["op"]["type"] in ("ok", "info", "invoke")
        json.dumps(result)  # the result is JSON-able as is


def test_knossos_mutex_etcd_verdict_is_recorded(record_property):
    path = TESTDATA / "knossos/mutex/bad/etcd.edn"
    result = check_ops(read_history(path), "mutex")
    record_property("etcd_mutex_valid", result["valid"])  # lands in junit XML
    print("mutex/bad/etcd.edn:", json.dumps({k: result[k] for k in ("valid", "calls", "configs")}))
    assert result["valid"] in (True, False, "unknown")

"""One anomaly vocabulary, checked both ways: every name the vocabulary (and
so the report) explains is emitted by its checker on a history or dumps made
to show it, and every name a registered checker emits is explained."""
from __future__ import annotations

import json

import pytest

from checkers.store import check_store
from checkers.vocabulary import ANOMALIES, VOCABULARY, of_checker
from harness import registry
from reports.anomalies import EXPLANATIONS, PHRASES
from tests.checkers import log_dumps, log_histories

pytestmark = pytest.mark.unit

HISTORIES = ["lost_write", "unseen", "inconsistent_offsets", "duplicate", "nonmonotonic_poll", "poll_skip",
             "nonmonotonic_send", "aborted_read", "realtime_order"]
DUMPS = ["divergent", "missing_committed", "lost_acknowledged"]


def store(tmp_path, name, ops, dumps):
    d = tmp_path / name
    (d / "nodes").mkdir(parents=True)
    (d / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    for node, dump in dumps.items():
        (d / "nodes" / node).mkdir()
        (d / "nodes" / node / "dump.json").write_text(json.dumps(dump))
    return str(d)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """{anomaly: checker} for every name any registered checker reported on the examples."""
    tmp = tmp_path_factory.mktemp("vocabulary")
    cases = [(h, getattr(log_histories, h)().ops, log_dumps.agreeing()) for h in HISTORIES]
    cases += [(d, log_histories.clean().ops, getattr(log_dumps, d)()) for d in DUMPS]
    out, keys = {}, set()
    for name, ops, dumps in cases:
        results = check_store(store(tmp, name, ops, dumps))
        for checker, section in results["checkers"].items():
            keys |= {(checker, k) for k in section["counts"]}
            out.update({k: checker for k, n in section["counts"].items() if n})
    return out, keys


def test_every_explained_name_is_emitted_by_its_checker(emitted):
    found, _ = emitted
    for name, anomaly in VOCABULARY.items():
        assert found.get(name) == anomaly.checker, f"{name}: no example made {anomaly.checker} report it"
    assert set(EXPLANATIONS) == set(PHRASES) == set(ANOMALIES)  # the report explains these and only these


def test_every_emitted_name_is_explained(emitted):
    _, keys = emitted
    checkers = registry.load_all(registry.CHECKERS)
    for checker, name in keys:
        assert name in VOCABULARY and VOCABULARY[name].checker == checker, (checker, name)
    for name, checker in checkers.items():
        assert {k for c, k in keys if c == name} == set(of_checker(name)) == set(checker.anomalies)
    assert all(a.jepsen and a.explanation and "{n}" in a.phrase for a in VOCABULARY.values())

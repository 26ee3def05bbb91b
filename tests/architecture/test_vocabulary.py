"""One anomaly vocabulary, checked both ways: every name the vocabulary (and
so the report) explains is emitted by its checker on a history or dumps made
to show it, and every name a registered checker emits is explained."""
from __future__ import annotations

import json

import pytest

from checkers.check_store import check_store
from checkers.vocabulary import ANOMALIES, VOCABULARY, of_checker
from harness import registry
from reports.anomalies import EXPLANATIONS, PHRASES
from history.formats import read_history
from tests.checkers import log_dumps, log_histories, txn_cases

pytestmark = pytest.mark.unit

DUMPS = {"divergence": "divergent"}  # example dumps named otherwise than their anomaly


def example(name: str):
    """(ops, dumps) made to show one anomaly: tests/checkers/log_histories.<name> over agreeing
    dumps, tests/checkers/log_dumps.<name> under a clean history, or the transactional history
    tests/data/txn/<name>.edn (the txn checker's; "txn-" left off). A new anomaly needs one."""
    if VOCABULARY[name].checker == "txn":
        return read_history(txn_cases.path(name.removeprefix("txn-"))), {}
    fn = name.replace("-", "_")
    if hasattr(log_histories, fn):
        return getattr(log_histories, fn)().ops, log_dumps.agreeing()
    dumps = getattr(log_dumps, DUMPS.get(name, fn), None)
    assert dumps is not None, f"{name}: add an example to tests/checkers/log_histories.py or log_dumps.py"
    return log_histories.clean().ops, dumps()


def store(tmp_path, name, ops, dumps):
    d = tmp_path / name
    (d / "nodes").mkdir(parents=True)
    (d / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    for node, dump in dumps.items():
        node, _, past = node.partition("@past")  # a past copy: nodes/<node>/past/<n>.json
        path = d / "nodes" / node / (f"past/{past}.json" if past else "dump.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dump))
    return str(d)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """{anomaly: checker} for every name any registered checker reported on the examples."""
    tmp = tmp_path_factory.mktemp("vocabulary")
    out, keys = {}, set()
    for name in ANOMALIES:
        ops, dumps = example(name)
        results = check_store(store(tmp, name, ops, dumps))
        for checker, section in results["checkers"].items():
            counts = section.get("counts") or {}  # a verdict-only checker (linearizability) counts nothing
            keys |= {(checker, k) for k in counts}
            out.update({k: checker for k, n in counts.items() if n})
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
    assert VOCABULARY and all((a.jepsen or a.jepsen_note) and a.explanation and "{n}" in a.phrase
               for a in VOCABULARY.values())

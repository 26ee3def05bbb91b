"""The report's transactions section: counts (committed, aborted, indefinite, rebalances)
and each cycle drawn with its edges labelled, beside its transactions' micro-ops."""
import json
import re

import pytest

from history.formats import read_history
from harness import verdict
from reports.report import build_report
from tests.checkers.txn_cases import path

pytestmark = pytest.mark.unit


def store_of(tmp_path, name: str):
    store = tmp_path / name
    store.mkdir()
    with open(store / "history.jsonl", "w") as handle:
        for op in read_history(path(name)):
            handle.write(json.dumps(op) + "\n")
    (store / "test.json").write_text(json.dumps({"workload": "queue"}))
    verdict.check_store(str(store), engine="local")
    return store


def test_a_cycle_is_drawn_beside_its_micro_ops(tmp_path):
    page = open(build_report(store_of(tmp_path, "G1c-realtime")), encoding="utf-8").read()
    section = page[page.index('<h2 id="transactions">'):]
    section = section[:section.index("</section>")]
    assert "committed <b>2</b>" in section and "aborted <b>0</b>" in section
    svg = section[section.index("<svg"):section.index("</svg>")]
    assert re.findall(r">(wr|realtime)</text>", svg) == ["wr", "realtime"]
    assert svg.count("<circle") == 2 and ">T0<" in svg and ">T2<" in svg
    assert "T2 sent 5 to key 1 at offset 0; T0 read it" in section
    assert "&#34;send&#34;,1,[0,5]" in section


def test_the_valid_history_counts_rebalances_and_draws_nothing(tmp_path):
    store = store_of(tmp_path, "valid")
    results = json.loads((store / "results.json").read_text())
    assert results["stats"]["rebalances"] == 1
    page = open(build_report(store), encoding="utf-8").read()
    section = page[page.index('<h2 id="transactions">'):]
    assert "rebalances <b>1</b>" in section and "indefinite <b>1</b>" in section
    assert "No dependency cycle." in section

"""The txn checker in-process on the hand-made histories (one per anomaly, a valid one),
the Jepsen import from the CLI, and malformed micro-ops refused in one line."""
import json
import subprocess
import sys

import pytest

from history.flatten import flatten
from history.formats import read_history
from checkers.txn_anomalies import check_flat
from checkers.vocabulary import of_checker
from tests.checkers.txn_cases import EXPECTED, jepsen_says, path

pytestmark = pytest.mark.unit


def txn_result(name: str, cap=None) -> dict:
    flat = flatten(read_history(path(name)))
    return check_flat(flat[0], flat[1], flat.ends, cap=cap)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_history_gives_its_anomaly(name):
    counts, valid = EXPECTED[name]
    result = txn_result(name)
    assert {k: n for k, n in result["counts"].items() if n} == counts
    assert result["valid"] is valid
    assert set(result["counts"]) == set(of_checker("txn"))
    assert "Jepsen's checker" in jepsen_says(name)


def test_every_txn_anomaly_has_a_history():
    shown = {k for counts, _v in EXPECTED.values() for k in counts}
    assert shown == set(of_checker("txn"))


def test_valid_history_counts_its_transactions():
    assert txn_result("valid")["transactions"] == {"committed": 5, "aborted": 1, "indefinite": 1}


def test_a_cycle_is_explained_edge_by_edge_with_offsets():
    (cycle,) = txn_result("G1c")["cycles"]
    assert cycle["kind"] == "G1c" and [e["kind"] for e in cycle["edges"]] == ["wr", "wr"]
    assert "T1 sent 2 to key 2 at offset 0; T0 read it" in cycle["text"]
    assert [t["mops"] for t in cycle["transactions"]] == [
        [["send", 2, [0, 2]], ["poll", {1: [[0, 1]]}]], [["send", 1, [0, 1]], ["poll", {2: [[0, 2]]}]]]
    (realtime,) = txn_result("G1c-realtime")["cycles"]
    assert {e["kind"] for e in realtime["edges"]} == {"wr", "realtime"}


def test_an_expired_search_is_unknown_with_the_component_size():
    result = txn_result("G1c", cap=0.0)
    assert result["valid"] == "unknown"
    assert result["unchecked"] == [{"family": "G1c", "transactions": 2}]
    assert "2 transactions" in result["note"]


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300)


def test_a_jepsen_history_edn_with_txn_ops_is_checked_from_the_cli(tmp_path):
    done = harness("check", path("G1c"), "--json")
    assert done.returncode == 1, done.stderr
    results = json.loads(done.stdout)
    assert set(results["checkers"]) == {"txn", "log", "replica-diff", "linearizability"}  # queue's set
    assert all(results["checkers"][name]["applies"] is False for name in ("replica-diff", "linearizability"))
    assert results["checkers"]["txn"]["counts"]["G1c"] == 1
    valid = harness("check", path("G0"), "--json")
    assert json.loads(valid.stdout)["checkers"]["txn"]["valid"] is True


@pytest.mark.parametrize("value, expected", [
    ("[[:send 1 [0 1]] [:read 2]]", "op 1 (txn ok): micro-op 1 ['read', 2]: unknown micro-op 'read'; expected send or poll"),
    ("[[:send 1 [0]]]", "op 1 (txn ok): micro-op 0 ['send', 1, [0]]: expected [\"send\", key, [offset, value]]"),
    ("[[:poll]]", "op 1 (txn ok): micro-op 0 ['poll']: expected [\"send\", key, [offset, value]]"),
])
def test_malformed_micro_ops_are_one_line_naming_the_op(tmp_path, value, expected):
    history = tmp_path / "bad.edn"
    history.write_text("[{:index 0, :type :invoke, :process 0, :f :txn, :value [[:send 1 1] [:poll]]}\n"
                       f" {{:index 1, :type :ok, :process 0, :f :txn, :value {value}}}]\n")
    done = harness("check", str(history))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


def test_the_bench_tables_hold_what_the_flattener_makes_of_the_same_history():
    from bench.engines import txn_synthetic

    ops = list(txn_synthetic.history(3000, seed=5))
    flat = flatten(ops)
    sends, reads = [], []
    for s, r in txn_synthetic.flat_rows(ops):
        sends += s
        reads += [row[:9] for row in r]
    assert sorted(sends) == sorted(flat[0])
    assert check_flat(sends, reads, []) == check_flat(flat[0], flat[1], [])
    counts = check_flat(sends, reads, [])["counts"]
    assert {k for k, n in counts.items() if n} == set(txn_synthetic.INJECTED)


def test_export_writes_txn_ops_back_as_jepsen_edn(tmp_path):
    from history.formats import write_edn

    ops = read_history(path("G1c"))
    out = tmp_path / "history.edn"
    write_edn(ops, out)
    text = out.read_text()
    assert ":f :txn" in text and "[:send 1 [0 1]]" in text and "[:poll {2 [[0 2]]}]" in text
    assert read_history(out) == ops

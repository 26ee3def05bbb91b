"""Reading and writing histories: JSONL, Jepsen EDN, and the errors on bad lines."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from history.formats import HistoryError, read_history, write_edn, write_jsonl
from tests.checkers.testdata import KNOSSOS

pytestmark = pytest.mark.unit


HARNESS_OPS = [
    {"index": 0, "time": 10, "process": 3, "type": "invoke", "f": "send", "value": [0, 17]},
    {"index": 1, "time": 20, "process": 4, "type": "invoke", "f": "poll", "value": None},
    {"index": 2, "time": 30, "process": 3, "type": "ok", "f": "send", "value": [0, [42, 17]]},
    {"index": 3, "time": 40, "process": 4, "type": "ok", "f": "poll",
     "value": {0: [[40, 15], [41, 16], [42, 17]], 1: []}},
    {"index": 4, "time": 50, "process": "nemesis", "type": "info", "f": "kill", "value": ["n2"]},
    {"index": 5, "time": 60, "process": 5, "type": "fail", "f": "send", "value": [1, 3],
     "error": "NOT_ENOUGH_REPLICAS"},
]


def write_text(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_jsonl_round_trip_turns_poll_keys_back_into_ints(tmp_path):
    path = tmp_path / "history.jsonl"
    write_jsonl(HARNESS_OPS, path)
    assert '"0":[[40,15]' in path.read_text()  # JSON has string keys on disk
    assert read_history(path) == HARNESS_OPS


def test_edn_round_trip_of_a_harness_history(tmp_path):
    path = tmp_path / "history.edn"
    write_edn(HARNESS_OPS, path)
    text = path.read_text()
    assert ":process :nemesis" in text and ":type :invoke" in text and ":f :send" in text
    assert read_history(path) == HARNESS_OPS


def test_jsonl_to_edn_to_jsonl_keeps_every_op(tmp_path):
    write_jsonl(HARNESS_OPS, tmp_path / "a.jsonl")
    write_edn(read_history(tmp_path / "a.jsonl"), tmp_path / "b.edn")
    write_jsonl(read_history(tmp_path / "b.edn"), tmp_path / "c.jsonl")
    assert read_history(tmp_path / "c.jsonl") == HARNESS_OPS


def test_edn_forms_vector_list_and_one_map_per_line_read_alike(tmp_path):
    body = [
        "{:process 0, :type :invoke, :f :cas, :value [1 2]}",
        "; a comment with a ] bracket and a \"quote",
        "{:process 0 :type :ok :f :cas :value [1 2] :note \"a } in a string\"}",
        "{:process :nemesis, :type :info, :f :start, :value #{:n1}}",
    ]
    as_vector = read_history(write_text(tmp_path, "v.edn", "[" + "\n ".join(body) + "]\n"))
    as_list = read_history(write_text(tmp_path, "l.edn", "(" + "\n ".join(body) + ")\n"))
    per_line = read_history(write_text(tmp_path, "p.edn", "\n".join(body) + "\n"))
    assert as_vector == as_list == per_line
    assert [op["index"] for op in as_vector] == [0, 1, 2]  # positions stand in for a missing :index
    assert as_vector[0] == {"process": 0, "type": "invoke", "f": "cas", "value": [1, 2], "index": 0}
    assert as_vector[1]["note"] == "a } in a string"
    assert as_vector[2]["process"] == "nemesis" and as_vector[2]["value"] == ["n1"]


def test_knossos_multi_register_txn_values_become_plain_lists():
    ops = read_history(KNOSSOS / "multi-register/good/multi-register.edn")
    assert ops[1]["value"] == [["read", "x", None], ["read", "y", None]]
    assert ops[1]["time"] == 7686334122
    assert all(op["type"] in ("invoke", "ok", "fail", "info") for op in ops)


def test_knossos_mutex_history_keeps_index_and_error():
    ops = read_history(KNOSSOS / "mutex/bad/etcd.edn")
    assert ops[1] == {"type": "fail", "f": "release", "process": 1, "time": 342667129,
                      "error": "not-held", "index": 1, "value": None}


# ---------------------------------------------------------------- bad input

GOOD_LINE = '{"index": 0, "process": 1, "type": "invoke", "f": "read", "value": null}'


@pytest.mark.parametrize("bad_line, expected", [
    ('{"index": 1, "process": 1, "type": "ok", "f": "read", "value": 3', "expected one JSON object per line"),
    ('[1, 2, 3]', "expected an op map"),
    ('{"process": 1, "f": "read"}', "missing type"),
    ('{"process": 1, "type": "done", "f": "read"}', "expected type to be one of invoke|ok|fail|info"),
    ('{"type": "ok", "f": "read"}', "expected process to be an integer"),
    ('{"process": 1, "type": "ok", "f": 5}', "expected f to be a name"),
])
def test_malformed_jsonl_line_names_file_line_and_expectation(tmp_path, bad_line, expected):
    path = write_text(tmp_path, "history.jsonl", f"{GOOD_LINE}\n\n{bad_line}\n{GOOD_LINE}\n")
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value).startswith(f"{path}:3: ")
    assert expected in str(err.value)
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("bad_op, expected", [
    ("{:process 2 :type :ok :f}", "expected an EDN op map"),                   # odd number of terms
    ("{:process 2 :type :ok :f :read :value #foo/bar 3}", "expected an EDN op map"),  # unknown tag
    ("[:process 2 :type :ok]", "expected an op map"),
    ("{:process 2 :type :finished :f :read}", "expected type to be one of"),
    ("{:process 2 :type :ok :value 3}", "missing f"),
])
def test_malformed_edn_op_names_file_line_and_expectation(tmp_path, bad_op, expected):
    text = (
        "; header comment\n"
        "[{:process 1, :type :invoke, :f :read, :value nil}\n"
        "{:process 1,\n :type :ok, :f :read, :value 1}\n"
        f" {bad_op}\n"
        " {:process 3, :type :invoke, :f :read, :value nil}]\n"
    )
    path = write_text(tmp_path, "history.edn", text)
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value).startswith(f"{path}:5: ")
    assert expected in str(err.value)


@pytest.mark.parametrize("text, line, expected", [
    ("[{:process 1 :type :ok :f :read}\n {:process 2 :type :ok :f :read]\n", 2, "unexpected ']'"),
    ("[{:process 1 :type :ok :f :read}\n {:process 2 :type :ok :f :read}\n", 1, "expected a closing bracket"),
    ('[{:process 1 :type :ok :f :read}\n {:process 2 :type :ok :f "oops}]\n', 2, 'expected a closing "'),
])
def test_unbalanced_edn_names_the_line(tmp_path, text, line, expected):
    path = write_text(tmp_path, "history.edn", text)
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert expected in str(err.value)


def test_torn_last_jsonl_line_is_skipped_but_a_torn_middle_line_is_not(tmp_path):
    torn = GOOD_LINE[:30]
    path = write_text(tmp_path, "history.jsonl", f"{GOOD_LINE}\n{torn}")
    assert len(read_history(path)) == 1
    path = write_text(tmp_path, "history.jsonl", f"{GOOD_LINE}\n{torn}\n")
    with pytest.raises(HistoryError, match=r"history\.jsonl:2: expected one JSON object per line"):
        read_history(path)


def test_unknown_extension_is_a_history_error(tmp_path):
    path = write_text(tmp_path, "history.txt", GOOD_LINE)
    with pytest.raises(HistoryError, match=r"history\.txt:1: expected a history file ending in \.jsonl or \.edn"):
        read_history(path)


def test_written_history_is_valid_json_per_line(tmp_path):
    path = tmp_path / "h.jsonl"
    write_jsonl(HARNESS_OPS, path)
    lines = path.read_text().splitlines()
    assert len(lines) == len(HARNESS_OPS)
    assert all(isinstance(json.loads(line), dict) for line in lines)


# --------------------------------------------------------------- EDN fast path

def knossos_files():
    return sorted(KNOSSOS.rglob("*.edn"))


def test_every_knossos_file_reads_the_same_on_the_fast_path_as_with_edn_format():
    from history.formats import _fast_edn, _read_edn_slow

    files = knossos_files()
    assert len(files) == 122
    for path in files:
        text = path.read_text()
        fast = _fast_edn(text)
        assert fast is not None, f"{path}: the fast path should take Jepsen's flat op maps"
        assert fast == _read_edn_slow(str(path), text), path


@pytest.mark.parametrize("body", [
    "{:process 0 :type :invoke :f :add :value #{1 2}}",          # a set
    "{:process 0 :type :invoke :f :w :value #inst \"2020-01-01T00:00:00Z\"}",  # a tag
    "{:process 0 :type :invoke :f :w :value {:x 1}}",            # a nested map
    "{:process 0 :type :invoke :f :w :value :a/b}",              # a namespaced keyword
    "{:process 0 :type :invoke :f :w :value \\c}",               # a character
    "{:process 0 :type :invoke :f :w :value 1N}",                # a big integer
    "{:process 0 :type :invoke :f :w :value \"two\nlines\"}",   # a string over two lines
    "{:process 0 :type :invoke :f :w :value [1 nil true :nil-ish \"a \\\"q\\\"\"]}",
])
def test_what_the_fast_path_refuses_edn_format_reads_alike(tmp_path, body):
    from history.formats import _read_edn_slow

    path = write_text(tmp_path, "h.edn", "[" + body + "\n {:process 0, :type :ok, :f :w}]\n")
    assert read_history(path) == _read_edn_slow(str(path), path.read_text())


def test_a_bad_op_on_the_fast_path_still_names_its_line(tmp_path):
    path = write_text(tmp_path, "h.edn", "[{:process 0 :type :invoke :f :w}\n {:process 0 :f :w}]\n")
    with pytest.raises(HistoryError, match=r"h.edn:2: .*missing type"):
        read_history(path)


@pytest.mark.parametrize("ops", [
    # a key name used as a value, in the first ops and after the sample of 64 the
    # fast path takes its key names from: the maps are read as key, value lists instead
    ["{:process 0 :type :invoke :f :value :value :type}"] * 3,
    ["{:process 0 :type :invoke :f :w :value 1}"] * 70 + ["{:process 0 :type :ok :f :w :value [:f nil]}"],
    ["{:process 0 :type :invoke :f :w :value 1}"] * 70 + ["{:process 0 :type :ok :f :w :value :time :time 3}"],
    # a key that first appears after the sample, a string key, a keyword with nil in its name
    ["{:process 0 :type :invoke :f :w}"] * 70 + ["{:process 0 :type :info :f :w :error :nil-ish}"],
    ["{:process 0, \"type\" :invoke, :f :w, :value \"a\"}", "{:process 1 :type :ok :f :w :value nil}"],
])
def test_the_fast_path_reads_maps_whatever_their_key_names_like_edn_format(tmp_path, ops):
    from history.formats import _fast_edn, _read_edn_slow

    text = "[" + "\n ".join(ops) + "]\n"
    path = write_text(tmp_path, "h.edn", text)
    assert _fast_edn(text) is not None
    assert read_history(path) == _read_edn_slow(str(path), text)

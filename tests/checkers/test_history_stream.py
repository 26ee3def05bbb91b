"""Streaming history.jsonl -> Parquet: same rows as the in-memory path, same errors.

The reference is `history.flatten` over `read_history`'s list, which the
local engine uses; the streamed path (`iter_jsonl` into `parquet.write_run`,
as `check_campaign` runs it) must write exactly those rows.
"""

import json
import math

import pyarrow.parquet as pq
import pytest

from history import parquet
from history.flatten import flatten, flatten_dumps
from history.formats import HistoryError, iter_jsonl, read_history
from checkers.check_store import StoreError, check_campaign, read_store_history
from tests.checkers import log_dumps, log_histories
from tests.checkers.synthetic_jsonl import write_history
from tests.checkers.test_store import make_store

pytestmark = pytest.mark.unit

RUN = "/store/run"


def odd_values():
    """Shapes the hand-made cases lack: non-int values, resets, open sends, a stale invoke."""
    h = log_histories.History()
    h.send(0, 0, "a", 0)
    h.send(1, 0, {"b": [1.5, "é"], "a": None}, 1)
    h.send(0, 0, True, 2)
    h.invoke_send(2, 1, 7)                                  # stale: process 2 invokes again
    h.invoke_send(2, 1, 8)
    h.poll(3, {0: [(0, "a"), (1, {"b": [1.5, "é"], "a": None}), (2, True)], 1: []})
    h._add(3, "ok", "assign", [0, 1])                       # a new consumer session
    h.poll(3, {10: [(0, 9)], 2: [(0, -4)]})
    h._add("nemesis", "info", "kill", ["n2"])
    h.final()
    h.invoke_send(4, 1, 9)                                  # never completes
    return h.ops


CASES = {"clean": log_histories.clean().ops, "odd-values": odd_values(),
         **{name: make().ops for name, make in log_histories.ANOMALOUS.items()},
         **{name: make().ops for name, (make, _) in log_histories.CONSUMER.items()}}


def write_jsonl_text(path, ops, tail=""):
    path.write_text("".join(json.dumps(op) + "\n" for op in ops) + tail)
    return path


def rows_of(out_dir, table):
    rows = pq.read_table(out_dir / f"{table}.parquet").to_pylist()
    assert all(row.pop("run") == RUN for row in rows)
    return [tuple(row.values()) for row in rows]


def expected_rows(ops, dumps):
    sends, reads, stats = flatten(ops)
    records, replicas = flatten_dumps(dumps)
    return {"sends": sends, "reads": with_seq(reads), "records": records,
            "replicas": replicas}, stats


def with_seq(reads):
    """Parquet's reads carry seq: the position of a read in its (session, key) stream."""
    seen = {}
    out = []
    for row in reads:
        stream = (row[6], row[0])  # (session, key)
        out.append(row + (seen.get(stream, 0),))
        seen[stream] = seen.get(stream, 0) + 1
    return out


@pytest.mark.parametrize("chunk_rows", [3, parquet.CHUNK_ROWS])
@pytest.mark.parametrize("name", sorted(CASES))
def test_streamed_parquet_rows_equal_the_in_memory_flattening(tmp_path, name, chunk_rows):
    path = write_jsonl_text(tmp_path / "history.jsonl", CASES[name])
    dumps = log_dumps.divergent()
    stats = parquet.write_run(str(tmp_path / "pq"), RUN, iter_jsonl(path), dumps, chunk_rows)
    expected, expected_stats = expected_rows(read_history(path), dumps)
    assert stats == expected_stats
    for table, rows in expected.items():
        assert rows_of(tmp_path / "pq", table) == rows, table
    if chunk_rows == 3 and len(expected["reads"]) > 3:
        assert pq.ParquetFile(tmp_path / "pq" / "reads.parquet").metadata.num_row_groups > 1


def test_synthetic_kafka_history_streams_to_the_same_rows(tmp_path):
    path = tmp_path / "history.jsonl"
    assert write_history(str(path), 2000, keys=20) == 3999
    stats = parquet.write_run(str(tmp_path / "pq"), RUN, iter_jsonl(path), {}, chunk_rows=500)
    expected, expected_stats = expected_rows(read_history(path), {})
    assert stats == expected_stats and stats["ops"] == 3999
    assert len(expected["reads"]) > 1000
    for table in ("sends", "reads"):
        assert rows_of(tmp_path / "pq", table) == expected[table], table


def test_rows_leave_in_chunks_while_the_history_is_still_being_read(tmp_path):
    path = tmp_path / "history.jsonl"
    write_history(str(path), 2000, keys=20)
    reads_file = tmp_path / "pq" / "reads.parquet"
    sizes = []

    def ops():
        for number, op in enumerate(iter_jsonl(path)):
            if number == 3000:
                sizes.append(reads_file.stat().st_size)
            yield op

    parquet.write_run(str(tmp_path / "pq"), RUN, ops(), {}, chunk_rows=100)
    assert sizes and sizes[0] > 10_000  # row groups were written before the end
    assert sizes[0] < reads_file.stat().st_size


def test_iteration_is_lazy_and_a_bad_middle_line_names_file_and_line(tmp_path):
    ops = log_histories.clean().ops
    path = tmp_path / "history.jsonl"
    lines = [json.dumps(op) for op in ops]
    lines[5] = '{"index": 5, "process": 1, "type": "ok", "f": "send", "value": [0, 1]'
    path.write_text("\n".join(lines) + "\n")
    reader = iter(iter_jsonl(path))
    assert next(reader) == ops[0]  # nothing past the first line was needed
    with pytest.raises(HistoryError) as err:
        list(reader)
    assert str(err.value) == (f"{path}:6: expected one JSON object per line (an op); "
                              "Expecting ',' delimiter at column 70")  # just past the end
    with pytest.raises(HistoryError, match=rf"^{path}:6: "):
        parquet.write_run(str(tmp_path / "pq"), RUN, iter_jsonl(path), {})


def test_a_cut_off_last_line_is_skipped_and_reported_after_iteration(tmp_path):
    ops = log_histories.clean().ops
    path = write_jsonl_text(tmp_path / "history.jsonl", ops, tail='{"index": 99, "ty')
    reader = iter_jsonl(path)
    assert reader.truncated is False
    assert list(reader) == read_history(path) == read_history(write_jsonl_text(tmp_path / "w.jsonl", ops))
    assert reader.truncated is True
    whole = iter_jsonl(write_jsonl_text(tmp_path / "whole.jsonl", ops, tail=json.dumps(ops[0])))
    assert len(list(whole)) == len(ops) + 1 and whole.truncated is False


def test_lines_only_the_json_module_reads_are_still_read(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"process": 1, "type": "ok", "f": "read", "value": NaN, '
                    '"time": 1180591620717411303424}\n'
                    '\n{"process": "nemesis", "type": "info", "f": "start", "value": "\\ud800"}\n')
    first, second = read_history(path)
    assert math.isnan(first["value"]) and first["time"] == 2 ** 70 and first["index"] == 0
    assert second == {"process": "nemesis", "type": "info", "f": "start", "value": "\ud800", "index": 1}


def test_a_line_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(b'{"process": 1, "type": "ok", "f": "read"}\n{"process": 1, "f": "\xff"}\n')
    with pytest.raises(HistoryError, match=rf"^{path}:2: expected one JSON object per line .*UTF-8"):
        read_history(path)


def test_store_reader_notes_the_cut_off_line_and_check_campaign_fails_cleanly(tmp_path):
    store = make_store(tmp_path / "s", log_histories.clean().ops, log_dumps.agreeing())
    with open(store / "history.jsonl", "a") as handle:
        handle.write('{"index": 99, "type": "ok", "f": "se')
    ops, truncated = read_store_history(str(store))
    assert truncated and len(ops) == len(log_histories.clean().ops) and ops[-1]["index"] != 99
    bad = make_store(tmp_path / "bad", log_histories.clean().ops, log_dumps.agreeing())
    lines = (bad / "history.jsonl").read_text().splitlines(keepends=True)
    lines[7] = '{"index": 7, "process": 2, "type": "done", "f": "poll"}\n'
    (bad / "history.jsonl").write_text("".join(lines))
    # Both fail before any Spark job starts: one store, and it cannot be read.
    with pytest.raises(HistoryError, match=r"bad/history\.jsonl:8: expected type to be one of"):
        check_campaign([str(bad)])
    assert not (bad / "parquet").exists()  # no half-written tables left behind
    found = check_campaign([str(bad), str(tmp_path / "none")], skip_bad=True)
    assert found[str(bad)]["valid"] == "unknown" and ":8: expected type" in found[str(bad)]["error"]
    assert "no history" in found[str(tmp_path / "none")]["error"]
    with pytest.raises(StoreError, match="no history"):
        check_campaign([str(tmp_path / "none")])

"""history.jsonl -> Parquet block-wise (history.jsonl_parquet) writes the reference's tables.

The reference is `parquet.write_run` fed op by op (any iterable of ops that
is not a JsonlOps goes that way). Every history the suite carries is
converted both ways and the tables compared whole (same rows, same order,
same types): the real store in tests/data, the Knossos corpus, the log
checker's hand-made cases (in the harness's compact spelling and in others),
synthetic Kafka histories, and seeded random mixtures of every line shape
the scanner takes or leaves to the reference reader, cut into small blocks
so that state crosses block boundaries everywhere.
"""

import json
import random
import threading

import numpy as np
import pyarrow.parquet as pq
import pytest

from history import jsonl_parquet, jsonl_scan, native, parquet
from bench.engines.jsonl_history import generate_jsonl
from history.formats import HistoryError, iter_jsonl, read_history, write_jsonl
from harness.run_store import read_dumps
from tests.checkers.synthetic_jsonl import write_history
from tests.checkers.test_history_stream import CASES
from tests.checkers.testdata import KNOSSOS, TESTDATA

pytestmark = pytest.mark.unit

RUN = "/store/run"
STORE = TESTDATA / "stores" / "hw-kill-seed11"


def convert_both(path, tmp_path, dumps=None):
    """Convert both ways; assert equal stats, tables and truncation; -> the tables."""
    dumps = dumps or {}
    fast, reference = iter_jsonl(path), iter_jsonl(path)
    fast_stats = parquet.write_run(str(tmp_path / "fast"), RUN, fast, dumps)
    reference_stats = parquet.write_run(str(tmp_path / "ref"), RUN, iter(reference), dumps)
    assert fast_stats == reference_stats
    assert fast.truncated == reference.truncated
    tables = {}
    for table in parquet.TABLES:
        got = pq.read_table(tmp_path / "fast" / f"{table}.parquet")
        want = pq.read_table(tmp_path / "ref" / f"{table}.parquet")
        assert got.schema == want.schema == parquet.SCHEMAS[table]
        assert got.to_pylist() == want.to_pylist(), table
        tables[table] = want
    return tables


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few lines, so pairing, sessions and streams cross block boundaries."""
    monkeypatch.setattr(jsonl_parquet, "BLOCK_BYTES", 700)


def test_the_real_store_converts_to_the_same_tables(tmp_path, small_blocks):
    dumps, _ = read_dumps(STORE)
    assert len(list(jsonl_parquet.scanned_blocks(iter_jsonl(STORE / "history.jsonl")))) > 100
    tables = convert_both(STORE / "history.jsonl", tmp_path, dumps)
    assert tables["reads"].num_rows == 3545 and tables["sends"].num_rows == 306
    assert tables["ends"].num_rows == 3 and tables["records"].num_rows > 0


def test_every_knossos_history_converts_to_the_same_tables(tmp_path):
    files = sorted(KNOSSOS.rglob("*.edn"))
    assert len(files) == 122
    for number, edn in enumerate(files):
        path = tmp_path / f"{number}.jsonl"
        write_jsonl(read_history(edn), path)
        convert_both(path, tmp_path / str(number))


@pytest.mark.parametrize("spelling", ["compact", "spaced"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_log_checker_cases_convert_to_the_same_tables(tmp_path, small_blocks, name, spelling):
    separators = (",", ":") if spelling == "compact" else None
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(op, separators=separators) + "\n" for op in CASES[name]))
    tables = convert_both(path, tmp_path)
    assert tables["reads"].num_rows > 0


def test_synthetic_histories_convert_to_the_same_tables(tmp_path, small_blocks):
    write_history(str(tmp_path / "a.jsonl"), 1500, keys=20)
    tables = convert_both(tmp_path / "a.jsonl", tmp_path / "a")
    assert tables["reads"].num_rows > 1000
    stats = generate_jsonl(str(tmp_path / "b.jsonl"), 3000, keys=8, inject=2, seed=5)
    tables = convert_both(tmp_path / "b.jsonl", tmp_path / "b")
    assert tables["reads"].num_rows == stats["reads"] and tables["ends"].num_rows == 8


def test_a_big_block_holds_state_from_many_runs(tmp_path):
    """The default block size: one block, runs split only by resets and the final op."""
    generate_jsonl(str(tmp_path / "h.jsonl"), 20_000, keys=50, seed=2)
    tables = convert_both(tmp_path / "h.jsonl", tmp_path)
    final = tables["reads"].column("final").to_pylist()
    assert any(final) and not all(final)


# -- seeded random mixtures of line shapes ------------------------------------

def _op(index, process, kind, f, value, **extra):
    return {"index": index, "time": index * 7, "process": process, "type": kind, "f": f,
            "value": value, **extra}


def _compact(op):
    return json.dumps(op, separators=(",", ":"))


def _random_value(rng):
    return rng.choice([rng.randrange(-5, 10**6), -rng.randrange(1, 99), 10**19 + rng.randrange(9),
                       1.5, "x", None, True, [1, "é"], {"b": 1, "a": [2]}])


def _odd_spelling(rng, op):
    """The same op (or nearly: another writer's) spelled so the scanner must leave it alone."""
    choice = rng.randrange(7)
    if choice == 0:
        return json.dumps(op)                            # spaces
    if choice == 1:
        return _compact(dict(reversed(list(op.items()))))  # other field order
    if choice == 2:
        return _compact({k: v for k, v in op.items() if k != "index"})  # no index
    if choice == 3:
        return _compact(op) + "\r"                       # CRLF
    if choice == 4:
        return _compact({**op, "process": f"c{op['process']}"})  # a named process
    if choice == 5:
        return _compact({**op, "error": 'say "hi" \\ 7'})  # escapes in the error
    return _compact(op).replace('"value":', '"extra":1,"value":')  # one more field


def random_history(seed, lines=400, calm=False):
    """Lines of every shape: fast sends and polls with all their forms and slow
    spellings, resets, nemesis ops, the final op, blanks, a repeated poll key...
    calm: few lines of the shapes the scanner leaves to the reference reader."""
    rng = random.Random(seed)
    out, index, value = [], 0, 0
    logs = {k: [] for k in range(-2, 5)}
    for _ in range(lines):
        process = rng.randrange(6)
        kind = rng.choice(["invoke", "ok", "ok", "fail", "info"])
        roll = rng.random()
        if calm and 0.7 <= roll < 0.85 and rng.random() > 0.05:
            roll = rng.random() * 0.7
        if roll < 0.35:
            key = rng.choice(list(logs))
            value += 1
            sent = value if calm or rng.random() < 0.8 else _random_value(rng)
            if kind == "invoke" or rng.random() < 0.3:
                body = [key, sent]
            else:
                logs[key].append(sent)
                body = [key, [len(logs[key]) - 1, sent]]
            extra = {"error": rng.choice(["E", "[1,2] x-1", "Timeout: 3", ""])} if kind in ("fail", "info") else {}
            op = _op(index, process, kind, "send", body, **extra)
        elif roll < 0.7:
            if kind == "ok" and rng.random() < 0.9:
                keys = rng.sample(list(logs), rng.randrange(0, 4))
                value_ = {str(k): [[o, v] for o, v in enumerate(logs[k])][rng.randrange(3):] for k in keys}
                op = _op(index, process, "ok", "poll", value_)
            else:
                op = _op(index, process, kind, "poll", None,
                         **({"error": "x"} if kind in ("fail", "info") else {}))
        elif roll < 0.75:
            op = _op(index, process, rng.choice(["ok", "invoke", "info"]),
                     rng.choice(["assign", "subscribe", "seek", "crash", "reset"]), [0])
        elif roll < 0.8:
            op = _op(index, "nemesis", "info", rng.choice(["kill", "start", "final", "send"]), ["n1"])
        elif roll < 0.83:
            op = _op(index, process, kind, rng.choice(["read", "write", "cas"]), _random_value(rng))
        elif roll < 0.85:
            out.append(rng.choice(["", "  "]))
            continue
        else:
            continue
        index += 1
        if rng.random() < (0.005 if calm else 0.08):
            out.append(_odd_spelling(rng, op))
        elif op["f"] == "poll" and op["type"] == "ok" and rng.random() < (0.01 if calm else 0.1) \
                and op["value"]:
            pairs = list(op["value"].items())   # keys out of order, or one key twice
            twice = pairs + [pairs[0]] if rng.random() < 0.5 else list(reversed(pairs))
            out.append(_compact(op).split('"value":')[0] + '"value":{'
                       + ",".join(f'"{k}":{_compact(v)}' for k, v in twice) + "}}")
        else:
            out.append(_compact(op))
    tail = rng.choice(["\n", "\n", '\n{"index": 1, "typ', ""])
    return "\n".join(out) + tail


@pytest.mark.parametrize("seed", range(12))
def test_random_mixtures_of_line_shapes_convert_to_the_same_tables(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(jsonl_parquet, "BLOCK_BYTES", [300, 2000, 1 << 20][seed % 3])
    monkeypatch.setattr(jsonl_scan, "SLOW_ACTIVE", [32, 2][seed % 2])  # whole blocks op by op too
    if seed % 4 == 3:  # without the C library: the scan's and the read rows' numpy ways
        monkeypatch.setattr(native, "library", lambda: None)
    path = tmp_path / "history.jsonl"
    path.write_text(random_history(seed))
    tables = convert_both(path, tmp_path)
    assert tables["sends"].num_rows > 10 and tables["reads"].num_rows > 10


@pytest.mark.parametrize("seed", range(3))
def test_one_block_of_many_runs_converts_to_the_same_tables(tmp_path, seed):
    """Few lines for the reference reader in one big block: runs between them, not a slow block."""
    path = tmp_path / "history.jsonl"
    path.write_text(random_history(seed, lines=3000, calm=True))
    block = next(iter(jsonl_parquet.scanned_blocks(iter_jsonl(path))))  # (a cut-off tail is another)
    assert len(block) > 2500 and not block.slow and len(block.active) > 10
    convert_both(path, tmp_path)


def test_the_scanner_takes_the_harness_lines_and_leaves_the_rest(tmp_path):
    """The fast path is really taken (and not taken) where it should be."""
    lines = [_compact(_op(0, 1, "invoke", "send", [3, 7])),
             _compact(_op(1, 1, "ok", "send", [3, [0, 7]])),
             _compact(_op(2, 2, "ok", "poll", {"3": [[0, 7]], "-1": []})),
             _compact(_op(3, 1, "fail", "send", [3, 8], error="[Errno 111] x")),
             json.dumps(_op(4, 1, "invoke", "send", [3, 9])),
             _compact(_op(5, "nemesis", "info", "final", None)),
             _compact(_op(6, 1, "invoke", "send", [3, -0.5])),
             _compact(_op(7, 2, "ok", "poll", {"3": [[0, 10**19]]}))]
    data = ("\n".join(lines) + "\n").encode()
    block = jsonl_scan.scan(data, 1, 0, iter_jsonl(tmp_path / "h.jsonl").decode)
    assert block.kind.tolist() == [jsonl_scan.SEND] * 2 + [jsonl_scan.POLL, jsonl_scan.SEND] \
        + [jsonl_scan.OTHER] * 4
    assert block.active == [4, 5, 6, 7]
    assert block.seg_key.tolist() == [-1, 3] and block.pair_value.to_pylist() == ["7"]


# -- errors --------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    '{"index":20001,"time":5,"process":3,"type":"ok","f":"send","value":[1,[2,3]]',
    '{"index":20001,"time":5,"process":3,"type":"done","f":"send","value":[1,[2,3]]}',
    '{"index":20001,"time":5,"process":3,"type":"ok","f":"poll","value":{"1":[[0,1]],}}',
])
def test_a_bad_line_deep_in_a_big_file_gives_the_reference_error(tmp_path, monkeypatch, bad):
    monkeypatch.setattr(jsonl_parquet, "BLOCK_BYTES", 64 << 10)
    path = tmp_path / "history.jsonl"
    generate_jsonl(str(path), 30_000, keys=20, seed=1)
    lines = path.read_text().splitlines(keepends=True)
    lines[20001] = bad + "\n"
    path.write_text("".join(lines))
    with pytest.raises(HistoryError) as want:
        read_history(path)
    assert str(want.value).startswith(f"{path}:20002: ")
    with pytest.raises(HistoryError) as got:
        parquet.write_run(str(tmp_path / "pq"), RUN, iter_jsonl(path), {})
    assert str(got.value) == str(want.value)


def test_a_cut_off_last_line_is_skipped_and_reported(tmp_path, small_blocks):
    path = tmp_path / "history.jsonl"
    written = generate_jsonl(str(path), 500, keys=5, seed=4)["ops"]
    with open(path, "a") as handle:
        handle.write('{"index":499,"time":9,"process":1,"type":"ok","f":"send","value":[1,[')
    reader = iter_jsonl(path)
    stats = parquet.write_run(str(tmp_path / "pq"), RUN, reader, {})
    assert reader.truncated and stats["ops"] == len(read_history(path)) == written
    convert_both(path, tmp_path / "both")


def test_the_scan_thread_hands_over_its_error_and_ends_with_its_consumer():
    def items():
        yield from range(5)
        raise HistoryError("h.jsonl:6: expected one JSON object per line (an op)")

    with pytest.raises(HistoryError, match="h.jsonl:6: "):
        list(jsonl_parquet.ahead(items(), depth=1))
    early = jsonl_parquet.ahead(items(), depth=1)
    assert next(early) == 0
    early.close()  # the consumer gives up while the thread waits on a full queue
    assert not [t for t in threading.enumerate() if t.name == "jsonl-scan"]


def test_stream_counts_come_back_from_the_spill_file():
    """Sessions idle since the last settle go to the file and come back exact."""
    from history.column_flatten import StreamCounts

    streams = StreamCounts()
    try:
        streams.of(1).update({5: 3, -7: 1, 10**15: 2})
        streams.of(2)[4] = 9
        streams.settle()
        streams.of(2)[4] += 1
        streams.settle()  # session 1 idle: spilled; session 2 used: kept
        assert streams.live_sessions() == {2}
        streams.settle()  # now 2 as well
        assert streams.live_sessions() == set()
        assert streams.of(1) == {5: 3, -7: 1, 10**15: 2}
        assert streams.of(2) == {4: 10}
        assert streams.of(3) == {}
        streams.of(1)[5] += 1
        streams.settle()
        streams.settle()  # spilled again, after reads from the file
        assert streams.live_sessions() == set()
        assert (streams.of(2), streams.of(1)) == ({4: 10}, {5: 4, -7: 1, 10**15: 2})
        # the block-wise counting: handed-out dicts, spilled and new sessions alike
        had = streams.add(np.array([1, 1, 4, 1]), np.array([5, 99, 10**15, -7]), np.array([2, 1, 1, 3]))
        assert had.tolist() == [4, 0, 0, 1]
        assert streams.of(1) == {5: 6, -7: 4, 10**15: 2, 99: 1} and streams.of(4) == {10**15: 1}
        streams.settle()
        streams.settle()
        assert streams.live_sessions() == set()
        had = streams.add(np.array([4, 2, 2, 7]), np.array([10**15, 4, -3, 4]), np.array([1, 1, 5, 2]))
        assert had.tolist() == [1, 10, 0, 0]
        assert streams.live_sessions() == {2, 4, 7}
        assert [streams.of(s) for s in (1, 2, 4, 7)] == [
            {5: 6, -7: 4, 10**15: 2, 99: 1}, {4: 11, -3: 5}, {10**15: 2}, {4: 2}]
        for session in (-1, 1 << 31):  # sessions are numbered from 0 (Flattener.session_of)
            with pytest.raises(ValueError):
                streams.of(session)
            with pytest.raises(ValueError):
                streams.add(np.array([1, session]), np.array([4, 4]), np.array([1, 1]))
    finally:
        streams.close()


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1000])
def test_blocks_are_whole_lines_and_cover_the_file(tmp_path, block_bytes):
    """read_blocks: each block ends at a newline (but a cut-off last line), lines longer
    than a block included, and together the blocks are the file."""
    path = tmp_path / "h.jsonl"
    rng = random.Random(block_bytes)
    text = b"".join(b"x" * rng.randrange(0, 150) + b"\n" for _ in range(200)) + b"cut-off"
    path.write_bytes(text)
    blocks = [data[:size] for data, size in jsonl_parquet.read_blocks(str(path), block_bytes)]
    assert b"".join(blocks) == text
    assert all(block.endswith(b"\n") for block in blocks[:-1]) and blocks[-1] == b"cut-off"

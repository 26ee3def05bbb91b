"""The history.jsonl scan's C pass (history/native.c) gives the numpy scan's blocks.

Every field of every block is compared between the two ways, on the real store, a
synthetic Kafka history and the seeded random mixtures of line shapes of
test_jsonl_parquet; and the C decision of which lines are HistoryWriter's two
shapes is compared with the regular expression it replaces (FAST_LINE, run by
Arrow's RE2) on the lines of those histories and on thousands of seeded
mutations of them (a byte dropped, doubled or replaced, digits added).

Jepsen's EDN: the C rewrite into JSON reads every Knossos history as the Python
fast path and edn_format do, and on seeded mutations of them (bytes dropped,
doubled, replaced; nil, keywords, comments, sets, tags, characters, ratios put in)
it either declines or gives what the Python readers give.
"""
from __future__ import annotations

import gc
import random
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from history import formats, jsonl_scan, native
from history.formats import HistoryError, iter_jsonl
from history.jsonl_parquet import read_blocks
from tests.checkers.synthetic_jsonl import write_history
from tests.checkers.test_jsonl_parquet import STORE, random_history
from tests.checkers.testdata import KNOSSOS

pytestmark = pytest.mark.unit


def test_the_library_is_built():
    assert native.library() is not None, (
        f"{native.LIBRARY} is missing or older than its source: run bash scripts/build_native.sh "
        "(scripts/setup.sh does)")


MEANINGFUL = {"type": lambda kind: np.flatnonzero(kind != jsonl_scan.OTHER),
              "process_text": lambda kind: np.flatnonzero(kind != jsonl_scan.OTHER),
              "send_value": lambda kind: np.flatnonzero(kind == jsonl_scan.SEND)}


def assert_same_blocks(path, block_bytes):
    history = iter_jsonl(path)
    lineno = 1
    for data, size in read_blocks(str(path), block_bytes):
        native = jsonl_scan.scan(data, lineno, lineno - 1, history.decode, size=size)
        numpy_way = jsonl_scan.scan(data[:size], lineno, lineno - 1, history.decode, use_native=False)
        assert np.array_equal(native.kind, numpy_way.kind)
        for name, got in vars(native).items():
            want = getattr(numpy_way, name)
            # entries of lines they do not apply to are meaningless (Block): compared where they apply
            where = MEANINGFUL.get(name, lambda kind: None)(native.kind)
            if where is not None:
                got, want = got.take(where), want.take(where)
            if isinstance(want, np.ndarray):
                assert got.dtype == want.dtype and np.array_equal(got, want), name
            elif isinstance(want, pa.Array):
                assert got.equals(want), name
            else:
                assert got == want, name
        lineno += len(native)


@pytest.mark.parametrize("block_bytes", [700, 1 << 20])
def test_the_real_store_scans_the_same(block_bytes):
    assert_same_blocks(STORE / "history.jsonl", block_bytes)


def test_a_synthetic_history_scans_the_same(tmp_path):
    path = tmp_path / "history.jsonl"
    write_history(str(path), 3000)
    assert_same_blocks(path, 64 << 10)


@pytest.mark.parametrize("seed", range(6))
def test_random_mixtures_scan_the_same(tmp_path, seed):
    path = tmp_path / "history.jsonl"
    path.write_text(random_history(seed))
    assert_same_blocks(path, 900)


def mutations(line: bytes, rng: random.Random, count: int):
    """Lines one edit away from `line` (the edits a corrupt or foreign file has)."""
    alphabet = b'0123456789-,:[]{}" enulrx\\\n'
    for _ in range(count):
        at = rng.randrange(len(line))
        edit = rng.randrange(4)
        if edit == 0:
            yield line[:at] + line[at + 1:]
        elif edit == 1:
            yield line[:at] + line[at:at + 1] + line[at:]
        elif edit == 2:
            yield line[:at] + bytes([rng.choice(alphabet)]) + line[at + 1:]
        else:
            yield line[:at] + b"9" * rng.randrange(1, 20) + line[at:]


def test_proven_lines_are_those_of_the_regular_expression(tmp_path):
    rng = random.Random(7)
    lines = []
    for seed in range(4):
        lines += [line + b"\n" for line in random_history(seed).encode().split(b"\n") if line]
    synthetic = tmp_path / "history.jsonl"
    write_history(str(synthetic), 500)
    lines += synthetic.read_bytes().splitlines(keepends=True)
    lines += [b'{"index":1,"time":-0,"process":0,"type":"ok","f":"poll","value":{}}\n',
              b'{"index":1,"time":5,"process":0,"type":"ok","f":"poll","value":{"-3":[[0,-1]]}}\n',
              b'{"index":1,"time":5,"process":0,"type":"info","f":"send","value":[1,2],"error":"a b!~"}\n',
              b'{"index":1,"time":5,"process":0,"type":"info","f":"send","value":[1,2],"error":"\xc3\xa9"}\n',
              b'{"index":1,"time":5,"process":0,"type":"ok","f":"send","value":[1,[123456789012345678,0]]}\n',
              b'{"index":1,"time":5,"process":0,"type":"ok","f":"send","value":[1,[1234567890123456789,0]]}\n',
              b'{"index":1,"time":5,"process":0,"type":"ok","f":"poll","value":null}']  # no newline
    lines += [m for line in lines[:3000] for m in mutations(line, rng, 4)]
    data = b"".join(lines)
    ends = np.cumsum([len(line) for line in lines])
    starts = np.concatenate(([0], ends[:-1]))
    offsets = np.concatenate(([0], ends)).astype(np.int32)
    array = pa.Array.from_buffers(pa.binary(), len(lines), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    want = pc.match_substring_regex(array, jsonl_scan.FAST_LINE).to_numpy(zero_copy_only=False)
    got = native.fast_lines(data, starts, ends)
    differ = [lines[k] for k in np.flatnonzero(got != want)[:5]]
    assert differ == []
    assert 0.2 < want.mean() < 0.9  # both kinds of line were tried


# -- Jepsen's EDN: the C rewrite into JSON (native.edn_json, formats._native_edn) -------

def python_read(path, data: bytes):
    """What the EDN reader gives without the C pass: its Python fast path, else edn_format."""
    fast = formats._fast_edn(data)
    return fast if fast is not None else formats._read_edn_slow(str(path), data.decode("utf-8"))


def test_every_knossos_history_reads_the_same_through_the_c_pass():
    taken = 0
    for path in sorted(KNOSSOS.rglob("*.edn")):
        data = path.read_bytes()
        ops = formats._native_edn(data)
        if ops is not None:
            taken += 1
            assert ops == formats._fast_edn(data) == formats._read_edn_slow(str(path), data.decode()), path
    assert taken >= 110  # the corpus is flat op maps but for a few files


def test_the_c_pass_leaves_the_garbage_collector_as_it_was():
    """The read pauses the collector and moves the ops out of the young generations
    (formats._promote_young): the collector runs again afterwards, a caller's frozen
    objects stay frozen, and a cycle made after the read is still collected."""
    path = KNOSSOS / "cas-register" / "good" / "mongodb-v0-ack-rollback-8.edn"
    data = path.read_bytes()
    assert gc.isenabled()
    assert formats._native_edn(data) is not None
    assert gc.isenabled() and gc.get_count()[0] < 100
    gc.disable()
    try:  # a caller that paused the collector itself keeps it paused
        assert formats._native_edn(data) is not None
        assert not gc.isenabled()
    finally:
        gc.enable()
    frozen = [[] for _ in range(10)]
    gc.freeze()
    try:
        held = gc.get_freeze_count()
        assert formats._native_edn(data) == formats._fast_edn(data)
        assert gc.get_freeze_count() == held  # not unfrozen by the read
    finally:
        gc.unfreeze()
    del frozen
    formats._native_edn(data)
    cycle = []
    cycle.append(cycle)
    ref = weakref.ref(_Cycle(cycle))
    gc.collect()
    assert ref() is None


class _Cycle:
    def __init__(self, other):
        self.me, self.other = self, other


def edn_mutations(data: bytes, rng: random.Random, count: int):
    alphabet = b'0123456789-:;,#\\"()[]{} \nnilxe'
    for _ in range(count):
        at = rng.randrange(len(data))
        edit = rng.randrange(4)
        if edit == 0:
            yield data[:at] + data[at + 1:]
        elif edit == 1:
            yield data[:at] + data[at:at + 1] + data[at:]
        elif edit == 2:
            yield data[:at] + bytes([rng.choice(alphabet)]) + data[at + 1:]
        else:
            yield data[:at] + rng.choice([b" nil ", b" :nil ", b" null ", b'"a;b"', b";c\n", b" 1N ", b"{}",
                                          b" :a/b ", b" #{1} ", b" \\c ", b'"\\u0041"', b" 1/2 "]) + data[at:]


def test_mutated_histories_read_as_edn_format_reads_them():
    """Wherever the C pass gives ops, they are the Python readers' (or it declines)."""
    rng = random.Random(3)
    paths = sorted(KNOSSOS.rglob("*.edn"), key=lambda p: p.stat().st_size)[:12]
    taken = 0
    for path in paths:
        for data in edn_mutations(path.read_bytes(), rng, 150):
            ops = formats._native_edn(data)
            if ops is None:
                continue
            taken += 1
            try:
                want = python_read(path, data)
            except (HistoryError, UnicodeDecodeError) as err:
                raise AssertionError(f"the C pass read what the readers refuse ({err}): {data[:300]!r}")
            assert ops == want, data[:300]
    assert taken > 300

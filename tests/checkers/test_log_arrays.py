"""The array kernel of the log checker (`checkers.log_arrays`, the Spark tasks' kernel)
gives the in-process kernel's result on every hand-made history, with text values, and on
random colliding rows, whole and split by key into parts that are merged back (injected
synthetic runs: test_arrays_synthetic)."""

import pytest

from checkers import log_anomalies, log_arrays
from history import parquet
from tests.checkers import arrays_cases, log_histories
from tests.checkers.test_spark_log import textual

pytestmark = pytest.mark.unit

HISTORIES = {"clean": log_histories.clean, **log_histories.ANOMALOUS,
             **{name: make for name, (make, _) in log_histories.CONSUMER.items()}}


def stored(tmp_path, name, ops):
    out = tmp_path / name
    parquet.write_run(str(out), name, ops, {})
    return arrays_cases.read(str(out), TABLES)


@pytest.mark.parametrize("name", sorted(HISTORIES))
@pytest.mark.parametrize("text", [False, True])
def test_every_history_as_the_kernel_finds_it(tmp_path, name, text):
    ops = HISTORIES[name]().ops
    ops = textual(ops) if text else ops
    assert log_arrays.check_tables(*stored(tmp_path, name, ops)) == log_anomalies.check(ops)


def test_without_seq_every_stream_is_walked(tmp_path):
    ops = log_histories.nonmonotonic_poll().ops
    sends, reads, ends = stored(tmp_path, "x", ops)
    assert log_arrays.check_tables(sends, reads.drop_columns(["seq"]), ends) == log_anomalies.check(ops)


TABLES = ("sends", "reads", "ends")


def random_rows(rng):
    """Flat rows of a small random history where everything collides: few keys, values,
    offsets and processes, so every kind and every tie shows up."""
    import random  # noqa: F401 (rng is a random.Random)
    sends, reads, ends = [], [], []
    index = 0
    for _ in range(rng.randint(0, 40)):
        key, value = rng.randint(0, 3), str(rng.randint(0, 12))
        kind = rng.choice(["ok", "ok", "ok", "fail", "info"])
        offset = rng.choice([None, *range(8)]) if kind != "fail" else None
        done = None if kind == "info" and rng.random() < 0.5 else index + rng.randint(1, 30)
        sends.append((key, value, offset, kind, f"p{rng.randint(0, 2)}", index, done))
        index += rng.randint(1, 5)
    position: dict = {}
    for _ in range(rng.randint(0, 60)):
        key, session = rng.randint(0, 3), rng.randint(0, 2)
        at = index + rng.randint(0, 60)
        for pos in range(rng.randint(1, 3)):
            reads.append((key, rng.randint(0, 8), str(rng.randint(0, 12)), f"p{session}", at, pos,
                          session, at - 1, rng.random() < 0.3))
    reads.sort(key=lambda r: (r[4], r[5]))
    # seq: the place in the (session, key) stream, as the store writes it
    seq = []
    for r in reads:
        stream = (r[6], r[0])
        seq.append(position.get(stream, 0))
        position[stream] = seq[-1] + 1
    for key in rng.sample(range(4), rng.randint(0, 4)):
        ends.append((key, rng.randint(0, 9), 900, 901, rng.choice([None, None, None, "gone"])))
    return sends, reads, ends, seq


def as_tables(sends, reads, ends, seq):
    import pyarrow as pa
    from history.flatten import END_COLUMNS, READ_COLUMNS, SEND_COLUMNS

    def table(rows, columns, table_name):
        schema = parquet.SCHEMAS[table_name]
        return pa.table({c: pa.array([r[i] for r in rows], schema.field(c).type)
                         for i, c in enumerate(columns)})
    reads_table = table(reads, READ_COLUMNS, "reads")
    reads_table = reads_table.append_column("seq", pa.array(seq, pa.int64()))
    return table(sends, SEND_COLUMNS, "sends"), reads_table, table(ends, END_COLUMNS, "ends")


@pytest.mark.parametrize("seed", range(300))
def test_random_histories(seed):
    import random
    sends, reads, ends, seq = random_rows(random.Random(seed))
    expected = log_anomalies.check_flat(sends, reads, ends)
    s, r, e = as_tables(sends, reads, ends, seq)
    assert log_arrays.check_tables(s, r, e) == expected
    assert log_arrays.check_tables(s, r.drop_columns(["seq"]), e) == expected
    if not any(row[4] for row in ends):  # (absent logs are counted after the merge)
        parts = [log_arrays.findings(*(t.filter(t["key"].to_numpy() % 2 == i) for t in (s, r, e)))
                 for i in range(2)]
        assert log_arrays.merge(parts).result() == expected

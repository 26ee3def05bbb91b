"""The array kernel of the replica diff (`checkers.replica_arrays`, the Spark tasks' kernel)
gives the in-process kernel's result on every hand-made history with every dump variant,
with text values, and on random colliding rows, also split into parts that are merged
back (injected synthetic runs: test_arrays_synthetic)."""

import json
import random

import pyarrow as pa
import pytest

from checkers import replica_arrays, replica_diff
from harness.run_store import PAST_MARK
from history import parquet
from history.flatten import RECORD_COLUMNS, REPLICA_COLUMNS, SEND_COLUMNS, flatten
from tests.checkers import arrays_cases, log_dumps, log_histories
from tests.checkers.test_spark_log import textual

pytestmark = pytest.mark.unit

HISTORIES = {"clean": log_histories.clean, **log_histories.ANOMALOUS,
             **{name: make for name, (make, _) in log_histories.CONSUMER.items()}}
DUMPS = {"none": dict, **{f.__name__: f for f in (
    log_dumps.agreeing, log_dumps.divergent, log_dumps.epoch_only, log_dumps.missing_committed,
    log_dumps.lost_acknowledged, log_dumps.overwritten)}}


@pytest.mark.parametrize("history", sorted(HISTORIES))
@pytest.mark.parametrize("dumps", sorted(DUMPS))
@pytest.mark.parametrize("text", [False, True])
def test_every_history_and_dump_as_the_kernel_finds_it(tmp_path, history, dumps, text):
    ops, dump = HISTORIES[history]().ops, DUMPS[dumps]()
    if text:
        ops, dump = textual(ops), textual(dump)
    parquet.write_run(str(tmp_path), "r", ops, dump)
    flat = flatten(ops)
    final_reads = replica_diff.final_reads_complete(flat[0], flat.ends)
    assert (replica_arrays.check_tables(*arrays_cases.read(str(tmp_path), TABLES), final_reads=final_reads)
            == replica_diff.check(dump, ops))


def test_the_hand_made_cases_show_every_kind():
    seen = set()
    for dumps in DUMPS.values():
        seen |= {k for k, n in replica_diff.check(dumps(), log_histories.clean().ops)["counts"].items() if n}
    assert seen == set(replica_diff.ANOMALIES)


TABLES = ("records", "replicas", "sends")


def test_ranges_merge_with_few_examples_kept(monkeypatch):
    """With limits of 2 examples and 3 differences, merged ranges keep the first ones."""
    small_limits(monkeypatch)
    rng = random.Random(7)
    rows = [random_rows(rng) for _ in range(40)]
    records, replicas, sends = ([r for i, part in enumerate(rows) for r in shifted(part[t], t, 10 * i)]
                                for t in range(3))
    whole = replica_diff.check_flat(records, replicas, sends)
    parts = [replica_arrays.findings(*as_tables([shifted(part[t], t, 10 * i) for t in range(3)]))
             for i, part in enumerate(rows)]
    assert replica_arrays.merge(parts[::-1]).result() == whole  # (in any order)
    assert len(whole["differences"]) == 3 and whole["differences_total"] > 3
    assert all(len(e) == 2 for e in whole["examples"].values())


def test_empty_and_null_columns():
    empty = as_tables(([], [], []))
    assert replica_arrays.check_tables(*empty) == replica_diff.check_flat([], [], [])
    records = [("n1", 0, 0, 0, "1"), ("n2", 0, 0, 1, "1")]
    replicas = [("n1", 0, 1, 1, 0), ("n2", 0, 1, 1, 0)]
    sends = [(0, "1", None, "info", "p0", 0, None), (0, "2", None, "info", "p1", 1, None)]
    r, p, s = as_tables((records, replicas, sends))
    s = s.set_column(2, "offset", pa.nulls(2)).set_column(6, "complete_index", pa.nulls(2))
    assert s.schema.field("offset").type == pa.null()
    expected = replica_diff.check_flat(records, replicas, sends)
    assert replica_arrays.check_tables(r, p, s) == expected
    assert expected["counts"]["divergence"] == 1


def test_examples_of_missing_offsets_are_ranges(monkeypatch):
    """The first keys are chosen by their examples: key 0's three missing offsets are one
    range, so with 2 examples kept key 1's range is the second."""
    small_limits(monkeypatch)
    records = [("n1", 0, 0, 0, "1"), ("n1", 0, 4, 0, "1"), ("n1", 1, 0, 0, "1"),
               ("n1", 2, 0, 0, "1")]
    replicas = [("n1", 0, 5, 5, 0), ("n1", 1, 3, 3, 0), ("n1", 2, 2, 2, 0)]
    expected = replica_diff.check_flat(records, replicas, [])
    assert [e["key"] for e in expected["examples"]["missing-committed"]] == [0, 1]
    assert replica_arrays.check_tables(*as_tables((records, replicas, []))) == expected


PAST = "n1" + PAST_MARK + "1"
NODES = ("n1", "n2", "n3", "remote", PAST, "n2" + PAST_MARK + "2")
VALUES = [json.dumps(v) for v in (100, 101, 102, "v", {"a": 1}, 2.5)]


def random_rows(rng):
    """Flat rows of small random dumps and sends where everything collides: few keys,
    nodes (past copies and the remote tier among them), offsets, epochs and values."""
    records, replicas, sends = [], [], []
    noise = rng.choice([0, 0.03, 0.2, 0.3])   # how often a copy holds another epoch or value
    nodes = NODES if rng.random() < 0.9 else rng.choice([(PAST,), ("remote", PAST), ()])
    described = rng.choice([0.9, 0.9, 0.9, 0.5, 0])  # else records without a replica row
    held = rng.choice([0.75, 0.75, 0.4])
    for node in nodes:
        for key in range(3):
            if rng.random() < 0.3:
                continue
            if rng.random() < described:
                for _ in range(2 if rng.random() < 0.05 else 1):  # a repeated row: the last counts
                    log_start = rng.choice([0, 0, 0, 1, 2])
                    replicas.append((node, key, rng.randint(0, 7), rng.randint(0, 8), log_start))
            offsets = [o for o in range(8) if rng.random() < held]
            if rng.random() < 0.1:
                offsets.append(rng.randint(0, 7))  # a repeated offset
            for offset in offsets:
                epoch = rng.choice([1, 2]) if rng.random() < noise else 0
                value = rng.choice(VALUES) if rng.random() < noise else VALUES[offset % 3]
                records.append((node, key, offset, epoch, value))
    index = 0
    for _ in range(rng.randint(0, 12)):
        kind = rng.choice(["ok", "ok", "ok", "fail", "info"])
        offset = rng.choice([None, *range(9)]) if kind != "fail" else None
        done = None if kind == "info" and rng.random() < 0.5 else index + rng.randint(1, 9)
        sends.append((rng.randint(0, 3), rng.choice(VALUES + ['"lost"']), offset, kind,
                      f"p{rng.randint(0, 2)}", index, done))
        index += rng.randint(1, 3)
    return records, replicas, sends


def shifted(rows, table, by):
    """Rows of table 0 (records), 1 (replicas) or 2 (sends) with their keys moved up by `by`."""
    at = 0 if table == 2 else 1
    return [r[:at] + (r[at] + by,) + r[at + 1:] for r in rows]


def as_tables(rows):
    def table(rows, columns, name):
        schema = parquet.SCHEMAS[name]
        return pa.table({c: pa.array([r[i] for r in rows], schema.field(c).type)
                         for i, c in enumerate(columns)})
    records, replicas, sends = rows
    return (table(records, RECORD_COLUMNS, "records"), table(replicas, REPLICA_COLUMNS, "replicas"),
            table(sends, SEND_COLUMNS, "sends"))


def small_limits(monkeypatch):
    for module in (replica_diff, replica_arrays):
        monkeypatch.setattr(module, "MAX_EXAMPLES", 2)
        monkeypatch.setattr(module, "MAX_DIFFERENCES", 3)


@pytest.mark.parametrize("seed", range(300))
def test_random_histories(seed, monkeypatch):
    rng = random.Random(seed)
    rows = random_rows(rng)
    complete, final_reads = rng.random() < 0.7, rng.random() < 0.7
    if seed % 3 == 0:   # the first keys' examples, then truncation
        small_limits(monkeypatch)
    expected = replica_diff.check_flat(*rows, complete=complete, final_reads=final_reads)
    assert replica_arrays.check_tables(*as_tables(rows), complete, final_reads) == expected


def test_random_histories_show_every_kind():
    found = {kind: 0 for kind in replica_diff.ANOMALIES}
    differences = committed = 0
    for seed in range(300):
        result = replica_diff.check_flat(*random_rows(random.Random(seed)))
        for kind, n in result["counts"].items():
            found[kind] += n > 0
        differences += result["differences_total"] > 0
        committed += any(d["committed"] for d in result["differences"])
    assert all(n >= 10 for n in found.values()), found
    assert differences >= 10 and committed >= 10

"""Spark and in-process drivers give identical results (log anomalies and replica diff).

All cases run as one campaign: each hand-made history (clean, one per
anomaly type, and the consumer cases of issue 29: reassignments, sends
across them, timed-out sends read back) paired with one set of replica dumps
is a run, plus a
synthetic run from the bench generator with every anomaly kind injected;
one Spark job checks them all, which also exercises the many-runs path.
"""

import pytest

from checkers import linearizability, log_anomalies, replica_diff
from bench.engines import synthetic as bench_synthetic
from history import parquet
from history.flatten import flatten
from checkers.linearizability import same_verdicts
from checkers.spark.engine import check_runs
from tests.checkers import log_dumps, log_histories

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]  # one Spark job over ~45 runs on a loaded 2-core machine

DUMPS = [log_dumps.agreeing, log_dumps.divergent, log_dumps.missing_committed,
         log_dumps.lost_acknowledged, log_dumps.overwritten]


def cases():
    """run name -> (ops, dumps); every history and every dump variant appear, also with
    non-integer values (the Spark driver names those by hash, integers by themselves)."""
    histories = {"clean": log_histories.clean, **log_histories.ANOMALOUS,
                 **{name: make for name, (make, _) in log_histories.CONSUMER.items()}}
    out = {}
    for i, (name, make) in enumerate(sorted(histories.items())):
        dumps = DUMPS[i % len(DUMPS)]
        out[f"{name}+{dumps.__name__}"] = (make().ops, dumps())
        texty = DUMPS[(i + 1) % len(DUMPS)]
        out[f"{name}+{texty.__name__}+text-values"] = (
            textual(make().ops), textual(texty()))
    out["no-dumps"] = (log_histories.clean().ops, {})
    return out


def textual(data):
    """The same history or dumps with every int value above 99 turned into a JSON text
    (strings, objects, floats, mixed with the remaining ints): same anomalies, new names."""
    def value(v):
        if isinstance(v, bool) or not isinstance(v, int) or v < 100:
            return v
        return [f"v{v}", {"n": v, "s": "x"}, v + 0.5, v][v % 4]

    def walk(node, key=None):
        if isinstance(node, dict):
            return {k: walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            if key == "records":  # [offset, epoch, crc, value]
                return [r[:3] + [value(r[3])] for r in node]
            if key == "value" and len(node) == 2 and isinstance(node[1], list):
                return [node[0], [node[1][0], value(node[1][1])]]  # send ok: [key, [offset, v]]
            if key == "value" and len(node) == 2:
                return [node[0], value(node[1])]                   # send: [key, v]
            return [walk(v, key) for v in node]
        return node

    def poll(op):
        if op.get("f") == "poll" and isinstance(op.get("value"), dict):
            op = dict(op, value={k: [[o, value(v)] for o, v in pairs]
                                 for k, pairs in op["value"].items()})
        return op

    if isinstance(data, list):
        return [poll(walk(op)) if op.get("f") != "poll" else poll(op) for op in data]
    return walk(data)


SYNTHETIC = "synthetic"


@pytest.fixture(scope="module")
def campaign(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign")
    runs = cases()
    dirs = []
    for run, (ops, dumps) in runs.items():
        out = root / run
        parquet.write_run(str(out), run, ops, dumps)
        dirs.append(str(out))
    synthetic = root / SYNTHETIC
    bench_synthetic.generate(str(synthetic), ops=6000, keys=14, inject=1, seed=3, run=SYNTHETIC,
                   chunk_ops=2500)
    found = check_runs(dirs + [str(synthetic)], list(runs) + [SYNTHETIC], spark=spark)
    return runs, found, str(synthetic)


def test_synthetic_run_with_every_kind_injected_matches_local(campaign):
    _runs, found, synthetic = campaign
    sends, reads, records, replicas, ends = bench_synthetic.load_flat(synthetic)
    log = log_anomalies.check_flat(sends, reads, ends)
    diff = replica_diff.check_flat(records, replicas, sends)
    assert found[SYNTHETIC]["log"] == log
    assert found[SYNTHETIC]["replica-diff"] == diff
    linear = linearizability.check_flat(sends, reads, ends)
    assert same_verdicts({"linearizability": linear}) == same_verdicts(
        {"linearizability": found[SYNTHETIC]["linearizability"]})
    assert linear["valid"] is False
    assert all(log["counts"].values()) and all(diff["counts"].values())


def test_every_anomaly_type_is_injected_somewhere(campaign):
    runs, found, _synthetic = campaign
    found = {run: found[run] for run in runs}
    seen = {kind for r in found.values() for kind, n in r["log"]["counts"].items() if n}
    seen |= {kind for r in found.values() for kind, n in r["replica-diff"]["counts"].items() if n}
    assert seen == set(log_anomalies.ANOMALIES) | set(replica_diff.ANOMALIES)


@pytest.mark.parametrize("run", sorted(cases()))
def test_spark_equals_local(campaign, run):
    runs, found, _synthetic = campaign
    ops, dumps = runs[run]
    flat = flatten(ops)
    local = {"log": log_anomalies.check(ops), "replica-diff": replica_diff.check(dumps, ops),
             "linearizability": linearizability.check_flat(flat[0], flat[1], flat.ends)}
    assert same_verdicts(found[run]) == same_verdicts(local)


@pytest.mark.parametrize("name", sorted(log_histories.CONSUMER))
def test_consumer_cases_show_their_anomalies_on_spark(campaign, name):
    """The Spark engine finds each consumer case's anomalies (and the local one agrees,
    test_spark_equals_local), not just the same nothing."""
    _runs, found, _synthetic = campaign
    _make, expected = log_histories.CONSUMER[name]
    for run in found:
        if run.split("+")[0] == name:
            assert {k for k, n in found[run]["log"]["counts"].items() if n} == expected, run

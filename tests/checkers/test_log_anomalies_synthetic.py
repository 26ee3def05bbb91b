"""The bench generator's synthetic runs, checked by the in-process kernels.

A clean synthetic run must be valid; an injected one must show exactly the
documented anomalies (bench/engines/synthetic.py: some injections also cause a
second, expected kind).
"""

from checkers import log_anomalies, replica_diff
from bench.engines import synthetic
import pytest

pytestmark = pytest.mark.unit


def check(path):
    sends, reads, records, replicas, ends = synthetic.load_flat(str(path))
    return (log_anomalies.check_flat(sends, reads, ends),
            replica_diff.check_flat(records, replicas, sends))


def test_clean_synthetic_run_is_valid(tmp_path):
    shape = synthetic.generate(str(tmp_path / "clean"), ops=8000, keys=10, inject=0, chunk_ops=3000)
    assert shape["rows"]["sends"] > 3000 and shape["rows"]["records"] > 3 * 3000
    log, diff = check(tmp_path / "clean")
    assert log["valid"] is True and diff["valid"] is True


def test_injected_synthetic_run_shows_each_kind(tmp_path):
    synthetic.generate(str(tmp_path / "bad"), ops=8000, keys=14, inject=1, seed=5, chunk_ops=3000)
    log, diff = check(tmp_path / "bad")
    assert log["counts"] == {
        "lost-write": 1, "unseen": 1,
        "inconsistent-offsets": 2,   # the foreign value, and the duplicate's offset
        "duplicate": 1, "nonmonotonic-poll": 1,
        "poll-skip": 4,              # one injected, two around the lost write, one after the re-read
        "nonmonotonic-send": 1,
        "realtime-order": 2,         # one injected, one from the nonmonotonic send
        "aborted-read": 1,
        "read-then-lost": 2}         # the values the foreign and the duplicated final reads replaced
    assert diff["counts"] == {"divergence": 1, "overwritten": 1, "missing-committed": 1,
                              "lost-acknowledged": 2}  # one injected, one from the hole


def test_too_few_keys_for_the_injections_is_a_clear_error(tmp_path):
    import pytest
    with pytest.raises(ValueError, match="--keys must be at least"):
        synthetic.generate(str(tmp_path / "x"), ops=100, keys=5, inject=1)

"""The linearizability search's columnar fast path (checkers/linear/log_columns.py) gives
exactly the whole search's result on every key it proves, and proves every key of a valid
concurrent history (histories of bench.engines.jsonl_history, with injected anomalies)."""
from __future__ import annotations

import json

import pytest

from bench.engines.jsonl_history import generate_jsonl
from checkers import linearizability
from history.flatten import flatten

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("inject,seed", [(0, 1), (1, 2), (3, 3)])
def test_fast_path_matches_the_whole_search(tmp_path, monkeypatch, inject, seed):
    path = tmp_path / "history.jsonl"
    generate_jsonl(str(path), 6000, keys=6, inject=inject, seed=seed)
    flat = flatten(json.loads(line) for line in path.read_text().splitlines())
    keys = linearizability.flat_keys(flat[0], flat[1], flat.ends)
    fast = linearizability.check_columns
    proven = [fast(*linearizability._columns(rows[0], rows[1]), rows[2], None)
              for _key, rows in keys]
    if not inject:  # a valid history: every key is proven without the whole search
        assert all(found is not None for found in proven)
    monkeypatch.setattr(linearizability, "check_columns", lambda *a, **k: None)
    whole = [linearizability.check_key(key, *rows, None) for key, rows in keys]
    for found, expected in zip(proven, whole):
        if found is not None:
            assert found == expected
    if inject:
        assert any(expected["valid"] is False for expected in whole)

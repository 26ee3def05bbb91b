"""What the array kernels' tests share (test_log_arrays, test_replica_arrays): the bench
generator's injected synthetic run, and its tables dealt by key as the Spark key pass deals them."""

import pyarrow.parquet as pq

from bench.engines import synthetic


def injected(tmp_path, seed: int) -> str:
    """A 6,000-op synthetic run with every kind injected -> its Parquet dir."""
    out = str(tmp_path / f"injected-{seed}")
    synthetic.generate(out, ops=6000, keys=14, inject=1, seed=seed, chunk_ops=2500)
    return out


def read(run_dir: str, names) -> list:
    """The run's tables `names`, whole."""
    return [pq.read_table(f"{run_dir}/{name}.parquet") for name in names]


def dealt(tables: list, parts: int = 3) -> list[list]:
    """The tables' rows in `parts` disjoint sets of keys, round-robin by key."""
    return [[t.filter(t["key"].to_numpy() % parts == i) for t in tables] for i in range(parts)]

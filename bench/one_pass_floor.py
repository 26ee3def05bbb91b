"""The floor of a one-pass Spark check: what reading and shuffling the inputs once costs.

    CHECKERS_SPARK_DRIVER_MEMORY=8g .venv/bin/python bench/one_pass_floor.py RUN_DIR [--rounds 2]

RUN_DIR is a run's Parquet tables, e.g. the store `harness bench --sizes 10000000 --out DIR`
leaves in DIR/ops-10000000. Why: issue 40's 30 s target for a 10M-op check asks whether any
design that reads every input once can meet it. Each round times, in one `local[2]` session:

- `baseline`: every column of every table read (the bench's same-run baseline);
- `shuffle`: the sends, reads and records with k and value ids, unioned, shuffled once by k;
- `shuffle_sort`: the same, then sorted by (k, offset) within partitions: a one-pass design's
  input before it computes any fact;
- `triples`: today's first fact table T (`checkers.spark.tables._triples`), for comparison.

Each is written to Spark's no-op sink; seconds and driver JVM CPU seconds are printed as one
JSON line per step. The first round carries the JVM's warm-up: read the last.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.engines.measure import jvm_cpu_seconds, read_everything  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run's Parquet tables (sends.parquet, reads.parquet, ...)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sends_path = os.path.join(args.run_dir, "sends.parquet")
    if not os.path.isfile(sends_path):
        parser.error(f"{args.run_dir}: no sends.parquet; give a run's tables, e.g. the ops-N folder "
                     f"`harness bench --out DIR` writes")
    import pyarrow.parquet as pq

    # the run's name as its rows carry it (a bench folder's is its own name, a store's need not be),
    # read before the JVM starts so that a bad folder costs nothing
    sends = pq.ParquetFile(sends_path)
    if sends.metadata.num_rows == 0:
        parser.error(f"{args.run_dir}: sends.parquet has no rows; give a run with a history")
    run = sends.read_row_group(0, columns=["run"]).column(0)[0].as_py()

    from pyspark.sql import functions as F

    from checkers.spark.session import spark_session
    from checkers.spark.tables import Tables, _triples, read_table
    from history.parquet import SCHEMAS

    spark = spark_session()

    def union(tables):
        """k, offset, vid, vtext, a, b, source of every send, read and record, shuffled by k."""
        sends = tables.raw("sends").select("k", "offset", "vid", "vtext", F.col("invoke_index").alias("a"),
                                           F.col("complete_index").alias("b"), F.lit(0).alias("source"))
        reads = tables.raw("reads").select("k", "offset", "vid", "vtext", F.col("invoke_index").alias("a"),
                                           F.col("index").alias("b"), F.lit(1).alias("source"))
        records = tables.raw("records").select("k", "offset", "vid", "vtext", F.col("epoch").alias("a"),
                                               F.lit(None).cast("bigint").alias("b"), F.lit(2).alias("source"))
        return sends.unionByName(reads).unionByName(records).repartition(tables.width, "k")

    def sink(frame) -> None:
        frame.write.format("noop").mode("overwrite").save()

    def with_tables(work):
        def run_it():
            tables = Tables(spark, [args.run_dir], [run])
            try:
                work(tables)
            finally:
                tables.release()
        return run_it

    steps = {
        "baseline": lambda: sum(read_everything(read_table(spark, [args.run_dir], t)) for t in SCHEMAS),
        "shuffle": with_tables(lambda t: sink(union(t))),
        "shuffle_sort": with_tables(lambda t: sink(union(t).sortWithinPartitions("k", "offset"))),
        "triples": with_tables(lambda t: sink(_triples(t.sends(), t.reads(), t.records()))),
    }
    for round_ in range(args.rounds):
        for name, work in steps.items():
            started, cpu = time.perf_counter(), jvm_cpu_seconds(spark)
            work()
            after = jvm_cpu_seconds(spark)
            print(json.dumps({"round": round_, "step": name, "seconds": round(time.perf_counter() - started, 1),
                              "jvm_cpu_s": None if cpu is None or after is None else round(after - cpu, 1),
                              "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    main()

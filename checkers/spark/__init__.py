"""The Spark engine (`harness check --engine spark`, campaigns): every registered
checker's Spark driver over the Parquet tables of history/parquet.py.

- engine.py: `check_runs`, which runs every registered checker's driver
  (`Checker.spark`) in one job and runs the key pass of the per-key ones;
- key_pass.py: one Spark task per core reads its keys' rows of every run (pyarrow)
  and runs every per-key kernel on them in its Python worker;
- session.py: the SparkSession factory (master, memory, log4j2.properties),
  and shipping `checkers` to the executors;
- tables.py, schema.py: the input tables as DataFrames (transactions), the check's keys;
- the drivers, named after the checker whose in-process kernel they match:
  log_anomalies.py (`log`), replica_diff.py (`replica-diff`),
  linearizability.py (`linearizability`), txn_anomalies.py (`txn`).

Kept import-light: importing the package does not import pyspark.
"""

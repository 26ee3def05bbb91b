"""The Spark engine (`harness check --engine spark`, campaigns): every registered
checker's Spark driver over the Parquet tables of history/parquet.py.

- engine.py: `check_runs`, which runs every registered checker's driver
  (`Checker.spark`) in one job and shares the tables and the flag job;
- session.py: the SparkSession factory (master, memory, log4j2.properties),
  and shipping `checkers` to the executors;
- tables.py, schema.py: the shared input tables; flags.py, details.py: the
  shared flag job and the rows behind its examples; sequential.py: the keys
  whose calls are in real-time order (decided in the JVM);
- the drivers, named after the checker whose in-process kernel they match:
  log_anomalies.py (`log`), replica_diff.py (`replica-diff`),
  linearizability.py (`linearizability`).

Kept import-light: importing the package does not import pyspark.
"""

"""Checkers of a store's history and replica dumps.

- the checker API: checker.py (what a registered checker is, `merge_valid`),
  vocabulary.py (every anomaly name a checker can report), store.py (check a
  store with every registered checker, engine local or spark);
- the checkers, in-process: log_anomalies.py (`log`, counting keys
  whose log was gone), replica_diff.py (`replica-diff`), linearizability.py
  (`linearizability`); linear/ is the WGL search behind the last one and
  `harness check-history` (any history, any model);
- input/: reading histories and dumps, flattening them, writing Parquet;
- spark/: the Spark engine and each checker's Spark driver;
- bench/: `harness bench`.

Kept import-light: submodules pull in edn_format or pyspark only when used.
"""

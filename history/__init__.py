"""History input: what every checker reads, in both engines.

- history.py: read and write histories (history.jsonl, Jepsen's EDN);
- flatten.py: a history and replica dumps -> the narrow flat rows both engines
  check (the reference conversion), column_flatten.py and flatten_runs.py its
  column-list and block-wise (numpy) forms;
- parquet.py: a run -> its Parquet tables (the Spark engine's input), with
  jsonl_scan.py and jsonl_parquet.py converting history.jsonl block by block.
"""

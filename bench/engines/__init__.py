"""`harness bench`: timed runs of both engines.

- synthetic.py: synthetic Parquet tables and replica dumps (no conversion), both
  engines timed on them (`run_bench`);
- from_jsonl.py: `harness bench --from-jsonl`, a check from history.jsonl step by
  step (`run_jsonl_bench`);
- jsonl_history.py: a realistic synthetic history.jsonl (`generate_jsonl`);
- measure.py: what the benchmarks measure beside seconds (JVM CPU and memory).
"""

"""The transactional (`txn`) checker's shared parts, after Jepsen's Kafka queue
checker and Elle: both engines reduce a history's flat rows to the same
`Graph` (transactions, their ww / wr / process edges, and the non-cycle
findings); `cycles` adds real-time order and searches it; `result` words it.

- graph.py: the shape both engines produce (`Graph`, `Finding`), edge kinds;
- local.py: the in-process reduction of flat rows (history.flatten);
- cycles.py: strongly connected components and a shortest cycle of each kind;
- explain.py: each cycle's steps in words, with the offsets behind them;
- result.py: counts, examples and the verdict.
The Spark reduction is checkers/spark/txn_anomalies.py.
"""

"""The `txn` checker: Jepsen's Kafka queue checker's transactional anomalies (after
`jepsen.tests.kafka` and Elle), over a history's flat rows.

Reduction to a dependency graph: checkers/txn/local.py (in-process) or
checkers/spark/txn_anomalies.py (Spark); cycles: checkers/txn/cycles.py; words:
checkers/txn/explain.py and result.py. It applies to histories with
transactions (workloads.Workload.checkers; checkers.applicable): the log
checker keeps running on the same history, flattened into single sends and polls.
"""
from __future__ import annotations

from checkers.vocabulary import of_checker

ANOMALIES = of_checker("txn")


def check_flat(sends: list, reads: list, ends: list, cap: float | None = None) -> dict:
    from checkers.txn import cycles
    from checkers.txn.explain import Evidence, cycle_transactions
    from checkers.txn.local import reduce
    from checkers.txn.result import summarize

    graph = reduce(sends, reads, ends)
    found = cycles.search(graph, cap=cycles.CAP_S if cap is None else cap)
    wanted = cycle_transactions(found.cycles)
    evidence = Evidence([s for s in sends if s[5] in wanted], [r for r in reads if r[7] in wanted])
    return summarize(graph, found, evidence)


def _declare():
    from checkers.checker import Checker

    return Checker("txn", "transactions (Jepsen's Kafka queue checker, Elle's cycles): aborted and "
                   "precommitted reads, lost writes, dependency cycles",
                   lambda data: check_flat(data.sends, data.reads, data.ends),
                   spark="checkers.spark.txn_anomalies")


CHECKER = _declare()

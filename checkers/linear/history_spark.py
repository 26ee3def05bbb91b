"""`harness check-history --engine spark`: the per-key WGL search of any history, keys spread over executors.

The history is read and split by key on the driver; each (key, calls) pair
is one record of an RDD, and executors run ``check_calls`` on it in Python
(the search is sequential per key, so there is nothing for DataFrame
expressions to do).  Verdicts are collected and merged exactly as the local
driver merges them, so both engines give the same result dict.
"""
from __future__ import annotations

import time
from typing import Any

from checkers.linear.calls import Call
from checkers.linear.history_local import merge_results, split_history
from checkers.linear.models import Model, parse_model
from checkers.linear.wgl import DEFAULT_MAX_CONFIGS, check_calls


def check_key(model: Model, key: Any, calls: list[Call], deadline_epoch: float | None,
              max_configs: int = DEFAULT_MAX_CONFIGS) -> tuple[Any, dict]:
    """Executor side: one key's search.  The deadline travels as wall-clock time."""
    deadline = None
    if deadline_epoch is not None:
        deadline = time.monotonic() + (deadline_epoch - time.time())
    return key, check_calls(model.fresh(), calls, deadline=deadline, max_configs=max_configs)


def check_ops_spark(ops: list[dict], model: str | Model, master: str | None = None,
                    time_limit: float | None = None, max_configs: int = DEFAULT_MAX_CONFIGS) -> dict:
    """Check a history with Spark (``master`` as in ``checkers.spark.session``)."""
    from checkers.spark.session import check_driver, resolve_master, ship_package, spark_session

    check_driver(resolve_master(master))
    spec = parse_model(model)
    started = time.monotonic()
    work = split_history(ops, spec)
    deadline_epoch = None if time_limit is None else time.time() + time_limit
    per_key: list[tuple[Any, dict]] = []
    if work:
        sc = spark_session(master).sparkContext
        ship_package(sc)
        slices = max(1, min(len(work), 4 * sc.defaultParallelism))
        per_key = (
            sc.parallelize(work, slices)
            .map(lambda item: check_key(spec, item[0], item[1], deadline_epoch, max_configs))
            .collect()
        )
    result = merge_results(per_key, model, "spark")
    result["seconds"] = round(time.monotonic() - started, 3)
    return result

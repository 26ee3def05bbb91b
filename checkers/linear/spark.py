"""Spark driver: the same per-key WGL kernel, with keys spread over executors.

The history is read and split by key on the driver; each (key, calls) pair
is one record of an RDD, and executors run ``check_calls`` on it in Python
(the search is sequential per key, so there is nothing for DataFrame
expressions to do).  Verdicts are collected and merged exactly as the local
driver merges them, so both engines give the same result dict.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import zipfile
from typing import Any

from checkers.linear.calls import Call
from checkers.linear.local import merge_results, split_history
from checkers.linear.models import Model, parse_model
from checkers.linear.wgl import DEFAULT_MAX_CONFIGS, check_calls

_SHIPPED: set[int] = set()


def _ship_package(spark_context) -> None:
    """Make ``checkers`` importable on executors (once per SparkContext)."""
    if id(spark_context) in _SHIPPED:
        return
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(package_dir)
    folder_for_zip = tempfile.mkdtemp(prefix="checkers-pyfiles-")
    atexit.register(shutil.rmtree, folder_for_zip, ignore_errors=True)
    archive = os.path.join(folder_for_zip, "checkers.zip")
    with zipfile.ZipFile(archive, "w") as zf:
        for folder, _, files in os.walk(package_dir):
            for name in files:
                if name.endswith(".py"):
                    full = os.path.join(folder, name)
                    zf.write(full, os.path.relpath(full, root))
    spark_context.addPyFile(archive)
    _SHIPPED.add(id(spark_context))


def check_key(model: Model, key: Any, calls: list[Call], deadline_epoch: float | None,
              max_configs: int = DEFAULT_MAX_CONFIGS) -> tuple[Any, dict]:
    """Executor side: one key's search.  The deadline travels as wall-clock time."""
    deadline = None
    if deadline_epoch is not None:
        deadline = time.monotonic() + (deadline_epoch - time.time())
    return key, check_calls(model.fresh(), calls, deadline=deadline, max_configs=max_configs)


def check_ops_spark(ops: list[dict], model: str | Model, master: str | None = None,
                    time_limit: float | None = None, max_configs: int = DEFAULT_MAX_CONFIGS) -> dict:
    """Check a history with Spark (``master`` as in ``checkers.spark_session``)."""
    from checkers.spark_session import check_master, resolve_master, spark_session

    check_master(resolve_master(master))
    spec = parse_model(model)
    started = time.monotonic()
    work = split_history(ops, spec)
    deadline_epoch = None if time_limit is None else time.time() + time_limit
    per_key: list[tuple[Any, dict]] = []
    if work:
        sc = spark_session(master).sparkContext
        _ship_package(sc)
        slices = max(1, min(len(work), 4 * sc.defaultParallelism))
        per_key = (
            sc.parallelize(work, slices)
            .map(lambda item: check_key(spec, item[0], item[1], deadline_epoch, max_configs))
            .collect()
        )
    result = merge_results(per_key, model, "spark")
    result["seconds"] = round(time.monotonic() - started, 3)
    return result

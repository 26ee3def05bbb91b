"""Linearizability of any history against a model: the WGL search per key
(calls.py, models.py, wgl.py) and ``harness check-history``'s two drivers,
history_local.py (in-process) and history_spark.py (keys spread over Spark
executors). The `linearizability` checker of every store check reuses the
search with the ``log`` model: checkers/linearizability.py, and on Spark
checkers/spark/linearizability.py.

``check_file`` is what ``harness check-history`` calls.  A model is named
``NAME`` or ``NAME:INITIAL`` with the initial value in EDN: ``register``,
``cas-register`` (``cas-register:0``), ``kv``, ``multi-register``
(``multi-register:{:x 0 :y 0}``), ``mutex``, ``log`` (see models.py for what
each checks).  Without an initial value registers start at nil, as in Knossos.
"""
from __future__ import annotations

from typing import Any


def check_ops(ops: list[dict], model: str, engine: str = "local", master: str | None = None,
              time_limit: float | None = None) -> dict:
    """Check plain-dict ops (docs/interfaces.md) against a model spec like ``cas-register:0``."""
    if engine == "local":
        from checkers.linear.history_local import check_ops as run
        return run(ops, model, time_limit=time_limit)
    if engine == "spark":
        from checkers.linear.history_spark import check_ops_spark
        return check_ops_spark(ops, model, master=master, time_limit=time_limit)
    raise ValueError(f"unknown engine {engine!r}; expected local or spark")


def check_file(path: Any, model: str, engine: str = "local", master: str | None = None,
               time_limit: float | None = None) -> dict:
    """Read a ``.jsonl``/``.edn`` history and check it.

    Returns a JSON-able dict: ``valid`` (True/False/"unknown"), counts, and on
    an invalid history a ``counterexample`` (key, op, longest partial
    linearization, model state after it).  Raises ``HistoryError`` on a bad
    file and ``ValueError`` on an unknown model or engine or an op the model
    does not know.
    """
    from history.formats import read_history

    ops = read_history(path)
    result = check_ops(ops, model, engine=engine, master=master, time_limit=time_limit)
    result["file"] = str(path)
    return result

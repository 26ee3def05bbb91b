"""HTML reports: one page per run store, and an index of every run in a store root.

The two entry points load on first use (PEP 562): importing one page module
(``reports.linear_page`` for ``harness check-history``) must not pull in the run
report's plotting stack (matplotlib, numpy), which costs most of a second."""

from __future__ import annotations

__all__ = ["build_report", "build_index"]


def __getattr__(name: str):
    if name == "build_report":
        from .report import build_report

        return build_report
    if name == "build_index":
        from .index import build_index

        return build_index
    raise AttributeError(f"module 'reports' has no attribute {name!r}")

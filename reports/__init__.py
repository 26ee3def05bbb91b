"""HTML reports: one page per run store, and an index of every run in a store root."""

from .index import build_index
from .report import build_report

__all__ = ["build_report", "build_index"]

"""Adapters of the systems under test, one package each (harness/sut.py is
the seam; each registers a `System` in pyproject's `replog.systems`)."""

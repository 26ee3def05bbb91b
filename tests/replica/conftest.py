"""Fixtures of the replica tests: ``local_cluster`` starts real processes (see cluster_fixture.py)."""

from cluster_fixture import local_cluster  # noqa: F401  (re-exported as a fixture)

"""Checkers: history input, anomaly analysis, replica-log diff, linearizability.

Kept import-light: submodules pull in edn_format or pyspark only when used.
"""

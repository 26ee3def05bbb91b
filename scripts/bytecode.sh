# Sourced by scripts/test.sh and scripts/demo.sh (not run): Python writes compiled modules.
#
# An environment with PYTHONDONTWRITEBYTECODE=1 (this kind of machine sets it) and a venv
# installed with `pip --no-compile` (scripts/setup.sh: byte-compiling all of pyspark at
# install cost 32 CPU-s) made every Python process compile every module it imported from
# source, every time: each pytest collection, each `harness` CLI a test starts, each replica
# node. Measured 2026-11-28: a stream's collection 11.1 -> 3.7 CPU-s, `harness --help` 0.38 ->
# 0.17. The compiled files go where Python looks for them (__pycache__ beside each module,
# ignored by git), next to those scripts/setup.sh compiles for the CLI.
unset PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX

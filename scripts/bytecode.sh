# Sourced by scripts/test.sh and scripts/demo.sh (not run): Python keeps compiled modules.
#
# An environment with PYTHONDONTWRITEBYTECODE=1 (this kind of machine sets it) and a venv
# installed with `pip --no-compile` (scripts/setup.sh: byte-compiling all of pyspark at
# install cost 32 CPU-s) make every Python process compile every module it imports from
# source, every time: each pytest collection, each `harness` CLI a test starts, each
# replica node. Measured 2026-11-28: a stream's collection 11.1 -> 3.7 CPU-s, `harness
# --help` 0.38 -> 0.17. The compiled files go to build/pycache (PYTHONPYCACHEPREFIX), not
# beside the sources, so the checkout and the venv stay as they were.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$PWD/build/pycache"

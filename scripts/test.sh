#!/usr/bin/env bash
# The whole test suite. pytest's exit code 5 (no tests collected) is a failure.
#
# With no arguments the suite runs as two streams at once (tests/conftest.py,
# `--stream`): the cluster modules (root, docker, browser tiers) in the foreground,
# and beside them, at a lower CPU priority, the in-process modules (unit and Spark
# tiers), which use the CPU the cluster tests leave idle while they wait on faults;
# their output follows the cluster tests'. With arguments, one pytest runs them
# (e.g. `bash scripts/test.sh -m unit`, or a file).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit $?

pytest_rc() {  # exit 5 (nothing collected) counts as a failure
    if [ "$1" -eq 5 ]; then
        echo "test: no tests were collected ($2); failing" >&2
        echo 1
    else
        echo "$1"
    fi
}

if [ "$#" -gt 0 ]; then
    .venv/bin/python -m pytest -q --durations=40 "$@"
    exit "$(pytest_rc $? "pytest $*")"
fi

side_log="$(mktemp)"
nice -n 10 .venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --stream in-process \
    >"$side_log" 2>&1 &
side=$!
trap 'kill -TERM "$side" 2>/dev/null; rm -f "$side_log"' EXIT
trap 'exit 130' INT TERM
echo "test: the in-process tests (unit, Spark) run beside these; their output follows" >&2
.venv/bin/python -m pytest -q --durations=40 --stream cluster
cluster_rc="$(pytest_rc $? "cluster stream")"
wait "$side"
side_rc="$(pytest_rc $? "in-process stream")"
echo
echo "==================== the in-process tests (unit and Spark tiers) ===================="
cat "$side_log"
echo "test: cluster stream exit $cluster_rc, in-process stream exit $side_rc" >&2
[ "$cluster_rc" -eq 0 ] && [ "$side_rc" -eq 0 ]

#!/usr/bin/env bash
# The whole test suite. pytest's exit code 5 (no tests collected) is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit $?
.venv/bin/python -m pytest -q --durations=40 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
    echo "test: no tests were collected; failing" >&2
    exit 1
fi
exit "$rc"

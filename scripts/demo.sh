#!/usr/bin/env bash
# Demo: a short run on three network-namespace hosts with every fault, then
# the verdict. Prints the store path. Exit code is the run's verdict
# (0 valid, 1 anomalies found, 2 unknown or error).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/harness run --era epoch --nemesis kill,pause,partition \
    --time-limit "${DEMO_TIME_LIMIT:-60}" --seed "${DEMO_SEED:-1}" "$@"

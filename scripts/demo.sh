#!/usr/bin/env bash
# Demo: a short run on three network-namespace hosts with every fault, then
# the verdict and the report. Ends with the report's path. Exit code is the
# run's verdict (0 valid, 1 anomalies found, 2 unknown or error).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit $?
source scripts/bytecode.sh
.venv/bin/harness run --era epoch --nemesis kill,pause,partition \
    --time-limit "${DEMO_TIME_LIMIT:-60}" --seed "${DEMO_SEED:-1}" --store store "$@"
rc=$?
report="$(readlink -f store/latest 2>/dev/null)/report.html"
if [ -f "$report" ]; then
    echo "report: $report"
else
    echo "demo: no report was written (exit $rc); see the messages above" >&2
fi
exit "$rc"

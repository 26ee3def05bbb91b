#!/usr/bin/env bash
# Measure kafka-late-commit (issue 37, docs/findings/kafka.md): runs one variant N times (the
# numbers only name the runs: the scenario's steps are fixed), one cluster at a time, each run
# started once the file $QUIET_FILE (if set: a shared machine's quiet window) is gone, and prints
# one line per run: variant, run, exit code, verdict, the checkers' counts, the store.
# Run it from the repository's root. NICE (default 15) is the runs' CPU priority.
# usage: systems/kafka/late_commit_runs.sh VARIANT FIRST LAST [STORE_ROOT]
set -u
variant=$1 first=$2 last=$3 root=${4:-store/late-commit}
here=$(cd "$(dirname "$0")/../.." && pwd)
for i in $(seq "$first" "$last"); do
  if [ -n "${QUIET_FILE:-}" ]; then while [ -e "$QUIET_FILE" ]; do sleep 20; done; fi
  out=$(cd "$here" && nice -n "${NICE:-15}" .venv/bin/python -m harness scenario kafka-late-commit --variant "$variant" \
        --store "$root/$variant-$i" --subnet 10.231.37.0/24 2>"$root.$variant-$i.err")
  code=$?
  store=$(echo "$out" | tail -1)
  verdict=$(cd "$here" && .venv/bin/python - "$store" <<'PY'
import json, sys, pathlib
p = pathlib.Path(sys.argv[1]) / "results.json"
try:
    r = json.loads(p.read_text())
except Exception as e:
    print("no-results", e); sys.exit()
counts = {}
for name, c in (r.get("checkers") or {}).items():
    for a, n in ((c or {}).get("counts") or {}).items():
        if n:
            counts[a] = counts.get(a, 0) + n
sc = r.get("scenario") or {}
print(r.get("valid"), sc.get("verdict"), ",".join(f"{a}={n}" for a, n in sorted(counts.items())) or "-")
PY
)
  echo "$variant $i exit=$code $verdict $store" | tee -a "$root.log"
done

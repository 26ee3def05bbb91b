#!/usr/bin/env bash
# Refresh requirements.lock: the exact version of every Python package a fresh
# install of pyproject.toml (with the test and bench extras) resolves to today. Run it after
# adding or changing a dependency in pyproject.toml, then commit both files;
# scripts/setup.sh installs from the lock (pip -c), so every clone gets the same
# versions until the next refresh. tests/architecture/test_lock.py compares.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --upgrade pip >/dev/null
"$tmp/venv/bin/pip" install -q -e ".[test,bench]"   # editable: no build/ left in the checkout
{
    echo "# Exact versions of every Python dependency (pip constraints): scripts/setup.sh"
    echo "# installs with -c requirements.lock. Refresh with: bash scripts/lock.sh"
    "$tmp/venv/bin/pip" freeze --exclude replog-harness
} > requirements.lock.tmp
mv requirements.lock.tmp requirements.lock
echo "lock: requirements.lock: $(grep -c '==' requirements.lock) packages" >&2

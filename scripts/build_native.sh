#!/usr/bin/env bash
# Build the project's C code (history/native.c: the history.jsonl scan's one
# pass) into build/native/, with the system's C compiler (gcc, Debian). Idempotent:
# rebuilds only when the source is newer. history/native.py loads it; without
# it the scan takes its numpy way (slower, same results). -O3 rather than -O2:
# the JSONL scan's pass 0.27 -> 0.21 CPU-s per 2M lines, the EDN pass over the
# Knossos corpus 0.011 -> 0.008 (gcc 12, same results: tests/checkers/test_native.py).
# This script being newer than the library also rebuilds it (a change of flags).
set -euo pipefail
cd "$(dirname "$0")/.."
src=history/native.c
lib=build/native/libhistory_native.so
if [ ! -f "$lib" ] || [ "$src" -nt "$lib" ] || [ scripts/build_native.sh -nt "$lib" ]; then
    mkdir -p build/native
    ${CC:-gcc} -O3 -shared -fPIC -Wall -Werror -o "$lib.tmp" "$src"
    mv "$lib.tmp" "$lib"
    echo "setup: built $lib" >&2
fi

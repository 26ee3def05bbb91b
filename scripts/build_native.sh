#!/usr/bin/env bash
# Build the project's C code (history/native.c: the history.jsonl scan's one
# pass) into build/native/, with the system's C compiler (gcc, Debian). Idempotent:
# rebuilds only when the source is newer. history/native.py loads it; without
# it the scan takes its numpy way (slower, same results).
set -euo pipefail
cd "$(dirname "$0")/.."
src=history/native.c
lib=build/native/libhistory_native.so
if [ ! -f "$lib" ] || [ "$src" -nt "$lib" ]; then
    mkdir -p build/native
    ${CC:-gcc} -O2 -shared -fPIC -Wall -Werror -o "$lib.tmp" "$src"
    mv "$lib.tmp" "$lib"
    echo "setup: built $lib" >&2
fi

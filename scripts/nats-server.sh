#!/usr/bin/env bash
# Install nats-server release X.Y.Z from the Go module proxy into a cached folder
# of the repository's ignored build/ directory and print the binary's path:
#   scripts/nats-server.sh 2.12.1   ->   build/nats/2.12.1/bin/nats-server
# Idempotent: an installed version is only printed. Needs `go` (1.21+).
# Called by scripts/setup.sh (NATS_VERSIONS="2.10.22 2.12.1") and, on demand,
# by systems/nats when a run asks for a version (system option `version`).
set -euo pipefail
cd "$(dirname "$0")/.."
v="${1:?usage: scripts/nats-server.sh X.Y.Z}"
v="${v#v}"
if ! [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "nats-server.sh: bad version '$1': give X.Y.Z (e.g. 2.12.1)" >&2
    exit 2
fi
dir="$PWD/build/nats/$v"
bin="$dir/bin/nats-server"
# One install at a time (two runs that need two releases at once, e.g. the crash-stream
# test's): Go's build cache does not share a package two `go install`s compile at the same
# moment, so both compiled it. A cold cache, 2.10.22 and 2.10.23: ~119 CPU-s at once
# (process accounting), 47.3 + 19.4 CPU-s one after the other (2026-11-29).
mkdir -p "$PWD/build/nats"
exec 9>"$PWD/build/nats/.install.lock"
flock 9
if [ ! -x "$bin" ]; then
    command -v go >/dev/null || { echo "nats-server.sh: go is not installed (needed for nats-server $v)" >&2; exit 2; }
    mkdir -p "$dir"
    echo "nats-server.sh: go install github.com/nats-io/nats-server/v2@v$v" >&2
    # Go's own module and build caches (per user, like Maven's ~/.m2): a module cache inside the
    # checkout put the sources at a new path in every clone, so nothing of the build cache was
    # reused (a clean clone's suite compiled two releases: 88 CPU-s); from the shared ones a
    # release already built elsewhere is only linked again.
    GOBIN="$dir/bin" GOFLAGS=-mod=mod CGO_ENABLED=0 nice go install "github.com/nats-io/nats-server/v2@v$v" >&2
fi
echo "$bin"

#!/usr/bin/env bash
# Make a Docker engine available for the docker backend, its tests and CI.
#
# Idempotent: installs docker.io with apt-get when dockerd is missing, starts
# dockerd in the background when no engine answers, and waits until it does.
# The engine is started so that it changes as little of the host as possible:
#   --bridge=none       no default docker0 bridge (the harness makes its own
#                       internal networks, nothing needs the default one)
#   --ip-forward=false  leave net.ipv4.ip_forward alone, so dockerd does not
#                       also switch the FORWARD policy to DROP (which would
#                       break the netns backend's traffic)
#   --iptables=true     needed for the isolation of internal networks
# Storage driver: overlay2, falling back to vfs where overlay2 cannot mount.
#
# Environment:
#   DOCKER_WAIT_SECONDS   how long to wait for the engine (default 60)
#   DOCKERD_LOG           dockerd's log file (default /var/log/harness-dockerd.log)
set -euo pipefail

WAIT_SECONDS="${DOCKER_WAIT_SECONDS:-60}"
LOG="${DOCKERD_LOG:-/var/log/harness-dockerd.log}"
SOCK=/var/run/docker.sock

say() { echo "ensure-docker: $*" >&2; }

engine_answers() {
    # Ask the engine itself, not the CLI (whose version may differ).
    [ -S "$SOCK" ] && curl -fsS --max-time 3 --unix-socket "$SOCK" http://localhost/_ping >/dev/null 2>&1
}

wait_for_engine() {
    local deadline=$((SECONDS + WAIT_SECONDS))
    while ! engine_answers; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            return 1
        fi
        if [ -n "${DOCKERD_PID:-}" ] && ! kill -0 "$DOCKERD_PID" 2>/dev/null; then
            return 1
        fi
        sleep 0.5
    done
}

if engine_answers; then
    say "engine already running"
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        say "dockerd is not installed; run as root or: sudo apt-get install -y docker.io"
        exit 2
    fi
    say "installing docker.io"
    DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io >/dev/null \
        || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io >/dev/null; }
fi
command -v curl >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y curl >/dev/null

start_dockerd() {
    local driver="$1"
    say "starting dockerd (storage driver $driver, log $LOG)"
    # setsid: the engine must outlive the shell (and the test) that started it.
    setsid dockerd --storage-driver="$driver" --bridge=none --ip-forward=false \
        --iptables=true >>"$LOG" 2>&1 < /dev/null &
    DOCKERD_PID=$!
    if wait_for_engine; then
        say "engine ready (storage driver $driver)"
        return 0
    fi
    kill "$DOCKERD_PID" 2>/dev/null || true
    wait "$DOCKERD_PID" 2>/dev/null || true
    DOCKERD_PID=
    return 1
}

# A stale pid file from an engine that died keeps a new dockerd from starting.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
fi

start_dockerd overlay2 || start_dockerd vfs || {
    say "dockerd did not start; see $LOG (last lines below)"
    tail -n 5 "$LOG" >&2 || true
    exit 2
}

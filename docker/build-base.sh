#!/usr/bin/env bash
# Build the docker backend's images without any image registry.
#
#   1. base image  harness-base:bookworm  - mmdebstrap (or debootstrap) of a minimal Debian
#      (bookworm, minbase + python3 iproute2 iptables openssh-server procps
#      nats-server)
#      from the Debian mirror apt already uses on this machine, then
#      `docker import`.
#   2. node image  harness-node:latest    - docker/Dockerfile on top of it,
#      built with --network none (the base already has every package).
#
# Cached: an image that exists is not built again (--force rebuilds both).
#
# Usage: docker/build-base.sh [--force]
# Environment:
#   HARNESS_BASE_IMAGE  (default harness-base:bookworm)
#   HARNESS_NODE_IMAGE  (default harness-node:latest)
#   DEBIAN_MIRROR       (default: the first Debian bookworm mirror in apt's sources)
#   ROOTFS_DIR          (default /var/tmp/harness-rootfs; removed after import)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BASE_IMAGE="${HARNESS_BASE_IMAGE:-harness-base:bookworm}"
NODE_IMAGE="${HARNESS_NODE_IMAGE:-harness-node:latest}"
ROOTFS="${ROOTFS_DIR:-/var/tmp/harness-rootfs}"
SUITE=bookworm
PACKAGES=python3,iproute2,iptables,openssh-server,procps,nats-server,fuse3,libfuse3-3,libfaketime,openjdk-17-jre-headless
# What every image must hold; an older image without one of these is rebuilt.
REQUIRED=(/usr/bin/python3 /usr/sbin/sshd /usr/sbin/nats-server /usr/bin/java)
LABEL=harness.image=1
LOGFILE="${TMPDIR:-/tmp}/harness-debootstrap.log"
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1

say() { echo "build-base: $*" >&2; }

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

apt_mirror() {
    # deb822 files (URIs:/Suites:) and one-line sources ("deb URI SUITE ...").
    local f uri
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        uri="$(awk -v suite="$SUITE" '
            /^URIs:/   { uris = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) found = uris }
            /^deb /    { for (i = 3; i <= NF; i++) if ($i == suite && $2 !~ /security/) { found = $2 } }
            /^deb \[/  { for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/ && $(i+1) == suite) found = $i }
            found && !printed { print found; printed = 1 }
        ' "$f")"
        if [ -n "$uri" ]; then echo "$uri"; return; fi
    done
    echo "http://deb.debian.org/debian"
}

"$HERE/../scripts/ensure-docker.sh"

if [ "$FORCE" = 1 ]; then
    docker image rm -f "$NODE_IMAGE" "$BASE_IMAGE" >/dev/null 2>&1 || true
fi

has_required() {  # image holds every REQUIRED file (one container, no network)
    local checks="true" f
    for f in "${REQUIRED[@]}"; do checks="$checks && test -x $f"; done
    docker run --rm --network none --entrypoint /bin/sh "$1" -c "$checks" >/dev/null 2>&1
}

if image_exists "$NODE_IMAGE"; then
    if has_required "$NODE_IMAGE"; then
        say "$NODE_IMAGE exists; nothing to do (--force rebuilds)"
        exit 0
    fi
    say "$NODE_IMAGE lacks one of ${REQUIRED[*]}: rebuilding it and its base"
    docker image rm -f "$NODE_IMAGE" "$BASE_IMAGE" >/dev/null 2>&1 || true
fi

if ! image_exists "$BASE_IMAGE"; then
    # mmdebstrap where apt can install it: the same packages from the same mirror took 40.6-41.6
    # CPU-s and 35 s against debootstrap's 52.3-60.1 CPU-s and 54-55 s (2026-11-29, this 2-core
    # machine, alternated); debootstrap otherwise.
    command -v mmdebstrap >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y mmdebstrap >/dev/null 2>&1 || true
    if command -v mmdebstrap >/dev/null 2>&1; then
        TOOL=mmdebstrap
    else
        command -v debootstrap >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >/dev/null
        TOOL=debootstrap
    fi
    MIRROR="${DEBIAN_MIRROR:-$(apt_mirror)}"
    say "$TOOL $SUITE from $MIRROR into $ROOTFS (a minute or more)"
    rm -rf "$ROOTFS"
    mkdir -p "$ROOTFS"
    "$TOOL" --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" \
        > "$LOGFILE" 2>&1 || { tail -n 20 "$LOGFILE" >&2; say "$TOOL failed; log: $LOGFILE"; exit 2; }
    # Keep the image small and free of anything host-specific.
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
        "$ROOTFS"/etc/ssh/ssh_host_* "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/*
    say "docker import -> $BASE_IMAGE"
    tar -C "$ROOTFS" --numeric-owner -c . \
        | docker import --change "LABEL $LABEL" --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$ROOTFS"
fi

say "docker build -> $NODE_IMAGE (BASE=$BASE_IMAGE, no network)"
DOCKER_BUILDKIT=0 docker build -q --network none --label "$LABEL" \
    --build-arg "BASE=$BASE_IMAGE" -t "$NODE_IMAGE" "$HERE" >/dev/null
say "done: $NODE_IMAGE"

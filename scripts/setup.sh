#!/usr/bin/env bash
# Set up a fresh machine (Debian, as root) for the harness. Idempotent: safe to
# run before every demo or test run.
#   - Debian packages the netns backend and the faults need (apt-get)
#   - Java for Spark, python3-venv for the virtual environment
#   - .venv with the project installed editable, test extras included, at the
#     versions of requirements.lock
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }

# fuse3 + libfuse3-3: lazyfs (power faults); libfaketime: clock faults; iproute2 has tc (packet faults)
# nats-server: the NATS JetStream system under test (systems/nats)
# maven: Kafka's jars from Maven Central (systems/kafka/setup.sh); the JDK's javac builds Kafka's Java client
# gcc: the history.jsonl scan's C pass (scripts/build_native.sh)
DEBS=(iproute2 iptables procps psmisc python3 python3-venv openjdk-17-jre-headless openjdk-17-jdk-headless chromium fuse3 libfuse3-3 libfaketime nats-server maven gcc)
missing=()
for p in "${DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        say "missing Debian packages: ${missing[*]}; run this script as root"
        exit 2
    fi
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    say "creating .venv"
    "$PY" -m venv .venv
fi
# Python packages at the exact versions of requirements.lock (pip constraints; refresh
# the lock with scripts/lock.sh). Reinstall only when pyproject.toml or the lock changed
# since the last install: the stamp holds their checksum (not their mtime, which a git
# checkout does not order reliably), so new entry points are always installed.
stamp=.venv/.replog-installed
want="$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c "import harness" 2>/dev/null; then
    say "pip install -c requirements.lock -e .[test,bench]"
    .venv/bin/pip install -q --upgrade pip >/dev/null
    # --no-compile: pip byte-compiled every installed module (pyspark's thousands) in one
    # process, 58 CPU-s of the install against 26 without (measured, load 12); Python
    # compiles the modules a command imports on first use instead.
    .venv/bin/pip install -q --no-compile -c requirements.lock -e ".[test,bench]"
    echo "$want" > "$stamp"
fi
bash scripts/build_native.sh
# nats-server releases besides Debian's (system option `version`): NATS_VERSIONS="2.10.22 2.12.1"
# installs them now with go install (scripts/nats-server.sh); a run that names another one installs it then.
for v in ${NATS_VERSIONS:-}; do
    say "nats-server $v: $(bash scripts/nats-server.sh "$v")"
done
# Systems that need more than Debian and PyPI (Kafka's jars from Maven Central) set themselves up.
for hook in systems/*/setup.sh; do
    [ -x "$hook" ] && bash "$hook"
done
# The CLI's modules compiled where Python looks for them (__pycache__ beside each): this kind
# of machine sets PYTHONDONTWRITEBYTECODE=1, so a `harness` command typed by hand compiled all
# it imported every time (`harness check-history` of a small EDN file, median of 7 on an idle
# machine: 0.34 s, 0.15 s compiled; 2026-11-28). The project's packages, then what `--help`
# and `check-history` import from the venv; cheap when all is compiled already. The suite and
# the demo write the rest there as they import it (scripts/bytecode.sh).
(
    unset PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX
    .venv/bin/python -m compileall -q -j 0 harness checkers history reports scenarios nemesis \
        workloads systems replica >/dev/null
    .venv/bin/harness --help >/dev/null
    page="$(mktemp -d)"
    .venv/bin/harness check-history --model cas-register:0 --out "$page/page.html" \
        tests/data/knossos/cas-register/bad/bad-analysis.edn >/dev/null 2>&1 || true
    rm -rf "$page"
)
say "ready (.venv/bin/harness)"

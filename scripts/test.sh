#!/usr/bin/env bash
# The whole test suite. pytest's exit code 5 (no tests collected) is a failure.
#
# With no arguments the suite runs as five streams at once (tests/conftest.py,
# `--stream`): the cluster modules of the replica model, campaigns and reports in the
# foreground; beside them Kafka's cluster modules (`kafka`, with tests/conftest.py's KAFKA_STREAM_MODULES), a second cluster stream
# (NATS's, Docker's and a few long-waiting replica modules: tests/conftest.py's CLUSTER_2_MODULES), and,
# at a lower CPU priority, the in-process modules, those with a Spark test and the rest
# (unit tier), which use the CPU the cluster tests leave idle while they wait on faults.
# The other four streams' output follows the foreground's. With arguments, one pytest runs them (e.g.
# `bash scripts/test.sh -m unit`, or a file).
set -uo pipefail
cd "$(dirname "$0")/.."
# The nats-server releases tests/nats runs (test_crash_stream_deletion, test_versions), built
# from the Go module proxy beside the set-up, which leaves a core partly idle (pip, apt,
# Maven), instead of inside the NATS tests, where two at once compiled ~119 CPU-s at the
# lowest priority of a busy machine; scripts/nats-server.sh builds one at a time, and a test
# that needs one still being built waits for it. Its own process group (setsid), so that an
# interrupted suite stops the compilers too.
nats_build=""
if [ "$#" -eq 0 ] && command -v go >/dev/null; then
    setsid bash -c 'for v in 2.10.22 2.10.23 2.12.1; do bash scripts/nats-server.sh "$v" >/dev/null 2>&1; done' &
    nats_build=$!
    trap 'kill -TERM -- -"$nats_build" 2>/dev/null' EXIT
    trap 'exit 130' INT TERM
fi
bash scripts/setup.sh || exit $?
source scripts/bytecode.sh

pytest_rc() {  # exit 5 (nothing collected) counts as a failure
    if [ "$1" -eq 5 ]; then
        echo "test: no tests were collected ($2); failing" >&2
        echo 1
    else
        echo "$1"
    fi
}

if [ "$#" -gt 0 ]; then
    .venv/bin/python -m pytest -q --durations=40 "$@"
    exit "$(pytest_rc $? "pytest $*")"
fi

kafka_log="$(mktemp)"
cluster2_log="$(mktemp)"
side_log="$(mktemp)"
spark_log="$(mktemp)"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 --stream kafka \
    >"$kafka_log" 2>&1 &
kafka=$!
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --stream cluster-2 \
    >"$cluster2_log" 2>&1 &
cluster2=$!
nice -n 10 .venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --stream in-process \
    >"$side_log" 2>&1 &
side=$!
nice -n 10 .venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --stream spark \
    >"$spark_log" 2>&1 &
spark=$!
trap 'kill -TERM "$kafka" "$cluster2" "$side" "$spark" 2>/dev/null
      [ -z "$nats_build" ] || kill -TERM -- -"$nats_build" 2>/dev/null
      rm -f "$kafka_log" "$cluster2_log" "$side_log" "$spark_log"' EXIT
trap 'exit 130' INT TERM
echo "test: Kafka's cluster tests, the second cluster stream (NATS, Docker, ...) and the in-process tests (unit; Spark)" \
     "run beside these; their output follows" >&2
.venv/bin/python -m pytest -q --durations=25 --stream cluster
cluster_rc="$(pytest_rc $? "cluster stream")"
wait "$kafka"
kafka_rc="$(pytest_rc $? "kafka stream")"
wait "$cluster2"
cluster2_rc="$(pytest_rc $? "cluster-2 stream")"
wait "$side"
side_rc="$(pytest_rc $? "in-process stream")"
wait "$spark"
spark_rc="$(pytest_rc $? "spark stream")"
echo
echo "==================== Kafka's cluster tests (and KAFKA_STREAM_MODULES) ===================="
cat "$kafka_log"
echo
echo "==================== the second cluster stream (NATS, Docker, CLUSTER_2_MODULES) ===================="
cat "$cluster2_log"
echo
echo "==================== the in-process tests without Spark (unit tier) ===================="
cat "$side_log"
echo
echo "==================== the in-process modules with a Spark test (unit and Spark tiers) ===================="
cat "$spark_log"
echo "test: cluster stream exit $cluster_rc, kafka stream exit $kafka_rc," \
     "cluster-2 stream exit $cluster2_rc, in-process stream exit $side_rc, spark stream exit $spark_rc" >&2
[ "$cluster_rc" -eq 0 ] && [ "$kafka_rc" -eq 0 ] && [ "$cluster2_rc" -eq 0 ] && [ "$side_rc" -eq 0 ] && [ "$spark_rc" -eq 0 ]

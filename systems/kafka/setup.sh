#!/usr/bin/env bash
# Kafka's default version's jars from Maven Central into build/kafka/<v>/lib, and
# the Java client (client=java) built against its kafka-clients into
# build/kafka-client/<v> (both cached; called by scripts/setup.sh). Other versions
# are resolved when a run asks for them (systems/kafka/install.py, java_build.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
# Short Maven runs: no C2, a serial collector (systems/kafka/install.py MAVEN_OPTS, measured there).
export MAVEN_OPTS="${MAVEN_OPTS:-$(.venv/bin/python -c 'from systems.kafka.install import MAVEN_OPTS; print(MAVEN_OPTS)')}"
v="${KAFKA_VERSION:-$(sed -n 's/^DEFAULT_VERSION = "\(.*\)"/\1/p' systems/kafka/__init__.py)}"
tiered() {   # LocalTieredStorage (the storage module's test jar) for --option tiered=true
    jar="build/kafka/$v/tiered/kafka-storage-$v-test.jar"
    [ -f "$jar" ] && return 0
    echo "setup: Kafka $v LocalTieredStorage (org.apache.kafka:kafka-storage:$v:jar:test) from Maven Central" >&2
    rm -rf "build/kafka/$v/tiered/partial"
    mvn -B -q -Dstyle.color=never -f systems/kafka/maven/pom.xml dependency:copy \
        "-Dartifact=org.apache.kafka:kafka-storage:$v:jar:test" "-DoutputDirectory=$PWD/build/kafka/$v/tiered/partial"
    mv "build/kafka/$v/tiered/partial/kafka-storage-$v-test.jar" "$jar"
    rm -rf "build/kafka/$v/tiered/partial"
}
java_client() {   # build/kafka-client/<v>: kafka-clients and Jackson, the program compiled (cached)
    .venv/bin/python -m systems.kafka.java_build "$v"
}
archive() {   # build/kafka/<v>/classes-*.jsa: the brokers' class-data archive (cached; systems/kafka/jvm.py)
    .venv/bin/python -m systems.kafka.jvm "$v"
}
if ls "build/kafka/$v/lib/kafka_2.13-$v.jar" >/dev/null 2>&1; then
    tiered
    java_client
    archive
    exit 0
fi
echo "setup: Kafka $v jars from Maven Central (mvn dependency:copy-dependencies)" >&2
rm -rf "build/kafka/$v/lib.partial"
mvn -B -q -Dstyle.color=never -f systems/kafka/maven/pom.xml "-Dkafka.version=$v" dependency:copy-dependencies \
    "-DoutputDirectory=$PWD/build/kafka/$v/lib.partial"
rm -rf "build/kafka/$v/lib"
mv "build/kafka/$v/lib.partial" "build/kafka/$v/lib"
tiered
java_client
archive

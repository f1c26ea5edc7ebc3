#!/usr/bin/env bash
# Container entry point: render the same configs as the local runtime, then exec the JVM.
#   kafka      needs BROKER_ID, ZOOKEEPER_CONNECT, ADVERTISED_HOST (default 127.0.0.1)
#   zookeeper  needs nothing
set -euo pipefail
JAVA=(java -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
      -Dlog4j.configuration=file:/opt/kafka/log4j.properties -cp "/opt/kafka/lib/*")
case "${1:-kafka}" in
  zookeeper)
    conf=/tmp/zookeeper.properties
    # Inside a container the client port must be reachable from the other containers.
    sed 's/^clientPortAddress=.*/clientPortAddress=0.0.0.0/' /opt/zookeeper/zookeeper.properties > "$conf"
    printf 'dataDir=/var/lib/zookeeper\nclientPort=2181\n' >> "$conf"
    exec "${JAVA[@]}" -Xmx${HEAP:-128m} org.apache.zookeeper.server.quorum.QuorumPeerMain "$conf" ;;
  kafka)
    : "${BROKER_ID:?}" "${ZOOKEEPER_CONNECT:?}"
    i=$BROKER_ID
    conf=/tmp/server.properties
    cp /opt/kafka/server.properties "$conf"
    cat >> "$conf" <<CONF
broker.id=$i
listeners=INTERNAL://0.0.0.0:1909$i,CLIENT://0.0.0.0:2909$i
advertised.listeners=INTERNAL://kafka-$i:1909$i,CLIENT://${ADVERTISED_HOST:-127.0.0.1}:909$i
log.dirs=/var/lib/kafka
zookeeper.connect=$ZOOKEEPER_CONNECT
CONF
    exec "${JAVA[@]}" -Xmx${HEAP:-512m} kafka.Kafka "$conf" ;;
  *) exec "$@" ;;
esac

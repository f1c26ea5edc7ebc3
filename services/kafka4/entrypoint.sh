#!/usr/bin/env bash
# Container entry point of a Kafka 4 node (KRaft, broker and controller): render the same
# config as the local runtime, format the storage on first start, then exec the JVM.
#   needs NODE_ID and CLUSTER_ID (one id for the three nodes); ADVERTISED_HOST (default 127.0.0.1)
set -euo pipefail
: "${NODE_ID:?}" "${CLUSTER_ID:?}"
JAVA=(java -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
      -Dlog4j2.configurationFile=/opt/kafka4/log4j2.properties -cp "/opt/kafka4/lib/*")
i=$NODE_ID
conf=/tmp/server.properties
cp /opt/kafka4/server.properties "$conf"
cat >> "$conf" <<CONF
node.id=$i
listeners=INTERNAL://0.0.0.0:1929$i,CLIENT://0.0.0.0:2929$i,CONTROLLER://0.0.0.0:1939$i
advertised.listeners=INTERNAL://kafka4-$i:1929$i,CLIENT://${ADVERTISED_HOST:-127.0.0.1}:929$i
controller.quorum.voters=1@kafka4-1:19391,2@kafka4-2:19392,3@kafka4-3:19393
log.dirs=/var/lib/kafka4
CONF
"${JAVA[@]}" -Xmx256m kafka.tools.StorageTool format --ignore-formatted \
  --cluster-id "$CLUSTER_ID" --config "$conf"
exec "${JAVA[@]}" -Xmx${HEAP:-512m} kafka.Kafka "$conf"

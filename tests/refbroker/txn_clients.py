"""Real transactional clients for the tests, each bounded: a confluent-kafka (librdkafka)
transactional producer, read_committed and read_uncommitted readers of whole topics, and Kafka's
own Java TransactionalMessageCopier (kafka-tools 3.9, a consume-transform-produce loop with
random aborts, its JSON status lines parsed).

librdkafka waits silently forever when the broker lacks something: every call here has a
timeout, and every wait a deadline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from group_clients import WAIT_S, quiet_log4j

from eoslab.settings import kafka_lib

CALL_TIMEOUT_S = 30.0
"""Every transactional call (init, commit, abort, send offsets) gives up after this."""
COPIER_TIMEOUT_S = 180.0


def transactional_producer(bootstrap: str, transactional_id: str, **overrides: Any) -> Producer:
    """A producer with its transactional id initialised (InitProducerId through the
    transaction coordinator)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **overrides,
        }
    )
    producer.init_transactions(CALL_TIMEOUT_S)
    return producer


def produce_transaction(
    producer: Producer, topic: str, values: Iterable[tuple[int, bytes]], *, commit: bool
) -> None:
    """One transaction of (partition, value) records, committed or aborted."""
    producer.begin_transaction()
    for partition, value in values:
        producer.produce(topic, value=value, partition=partition)
    if commit:
        producer.commit_transaction(CALL_TIMEOUT_S)
    else:
        producer.flush(CALL_TIMEOUT_S)  # the records are in the log before the abort
        producer.abort_transaction(CALL_TIMEOUT_S)


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> dict[int, list[bytes]]:
    """Every value of every partition from offset 0 to its end as the isolation level sees it
    (read_committed: up to the last stable offset, aborted records dropped)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic} not read to its end in {WAIT_S} s: {values}")
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
            elif error is not None:
                raise AssertionError(f"reading {topic}: {error}")
            else:
                at_end.discard(message.partition())
                values[message.partition()].append(message.value())
    finally:
        consumer.close()
    return values


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """ListOffsets(latest) per partition: the last stable offset under read_committed, the high
    watermark under read_uncommitted."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "end-offsets", "isolation.level": isolation}
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), CALL_TIMEOUT_S)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def fenced(error: KafkaException) -> bool:
    """librdkafka's verdict on a producer whose epoch is gone: a fatal fencing error."""
    kafka_error = error.args[0]
    return bool(kafka_error.fatal()) and kafka_error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )


class TransactionalCopier:
    """org.apache.kafka.tools.TransactionalMessageCopier in its own JVM: a read_committed
    consumer in a group, a transactional producer copying every batch it polls into the same
    partition of the output topic, the consumer's offsets sent with the transaction, and one
    transaction in three aborted (its input read again). It exits once nothing is left."""

    def __init__(
        self,
        bootstrap: str,
        source: str,
        output: str,
        *,
        group: str,
        transactional_id: str,
        messages: int,
        log_dir: Path,
    ) -> None:
        java = shutil.which("java")
        assert java is not None, "java is not on PATH"
        self.command = [
            java, "-Xmx192m", "-XX:TieredStopAtLevel=1", "-cp", f"{kafka_lib()}/*",
            f"-Dlog4j.configuration=file:{quiet_log4j(log_dir)}",
            "org.apache.kafka.tools.TransactionalMessageCopier",
            "--broker-list", bootstrap, "--input-topic", source, "--input-partition", "0",
            "--output-topic", output, "--consumer-group", group,
            "--transactional-id", transactional_id, "--max-messages", str(messages),
            "--transaction-size", "10", "--group-mode", "--use-group-metadata",
            "--enable-random-aborts",
        ]  # fmt: skip
        self.log = log_dir / f"copier-{transactional_id}.log"

    def run(self) -> list[dict[str, Any]]:
        """Run to the end; the status lines it printed."""
        with self.log.open("wb") as stderr:
            done = subprocess.run(
                self.command,
                stdout=subprocess.PIPE,
                stderr=stderr,
                timeout=COPIER_TIMEOUT_S,
                check=False,
            )
        statuses = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]
        assert done.returncode == 0, f"the copier failed ({self.log}): {statuses[-3:]}"
        return statuses

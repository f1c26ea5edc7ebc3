"""librdkafka (confluent-kafka) producers and consumers for the end-to-end tests.

Every value is b"<partition>:<sequence>": the test picks the partition itself, so per
partition the sequences must come back complete, in order and exactly once.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

IDEMPOTENT = {
    "enable.idempotence": True,
    "acks": "all",
    "max.in.flight.requests.per.connection": 5,
    "linger.ms": 5,
    "batch.num.messages": 50,
}
MAX_UNACKED = 1000
ACK_WAIT_S = 60.0


@dataclass
class DeliveryLog:
    acked: dict[tuple[int, int], int] = field(default_factory=dict)
    """(partition, sequence) -> offset"""
    failed: list[KafkaError] = field(default_factory=list)

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed.append(error)
            return
        partition, sequence = (int(x) for x in message.value().split(b":"))
        self.acked[partition, sequence] = message.offset()


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    *,
    config: dict[str, object] | None = None,
    during: Callable[[DeliveryLog], None] | None = None,
    flush_timeout_s: float = 60.0,
) -> DeliveryLog:
    """Send `count` records round-robin over the partitions; `during` is called after every
    send (to inject a fault at the right moment). Returns what was acknowledged."""
    log = DeliveryLog()
    producer = Producer({"bootstrap.servers": bootstrap, **IDEMPOTENT, **(config or {})})
    next_sequence = [0] * partitions
    for n in range(count):
        partition = n % partitions
        value = f"{partition}:{next_sequence[partition]}".encode()
        next_sequence[partition] += 1
        while True:
            try:
                producer.produce(topic, value, partition=partition, on_delivery=log.on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        _wait_for_acks(producer, log, unacked_limit=n + 1 - MAX_UNACKED)
        if during is not None:
            during(log)
    remaining = producer.flush(flush_timeout_s)
    assert remaining == 0, f"{remaining} records still undelivered after {flush_timeout_s}s"
    return log


def _wait_for_acks(producer: Producer, log: DeliveryLog, unacked_limit: int) -> None:
    """Keep at most MAX_UNACKED records outstanding, so faults land mid-stream."""
    deadline = time.monotonic() + ACK_WAIT_S
    while len(log.acked) + len(log.failed) < unacked_limit:
        assert time.monotonic() < deadline, f"no progress in {ACK_WAIT_S}s"
        producer.poll(0.01)


def consume_all(
    bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 60.0
) -> dict[int, list[tuple[int, int]]]:
    """Every record of every partition up to its current high watermark, with assign():
    partition -> [(offset, sequence), ...] in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eoslab-refbroker-tests",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: dict[int, list[tuple[int, int]]] = defaultdict(list)
        positions = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"consumed only up to {positions} of {ends}"
            for message in consumer.consume(500, 0.5):
                assert message.error() is None, message.error()
                partition, sequence = (int(x) for x in message.value().split(b":"))
                assert partition == message.partition()
                records[partition].append((message.offset(), sequence))
                positions[partition] = message.offset() + 1
        return dict(records)
    finally:
        consumer.close()


def assert_exactly_once_in_order(
    records: dict[int, list[tuple[int, int]]],
    acked: dict[tuple[int, int], int],
    sent_per_partition: int,
) -> None:
    """Per partition: sequences 0..n-1, each once, in offset order; every ack points at its record."""
    for partition, rows in records.items():
        sequences = [sequence for _, sequence in rows]
        assert sequences == list(range(sent_per_partition)), (
            f"partition {partition}: duplicates/gaps/reorders, "
            f"{len(sequences)} records, {len(set(sequences))} distinct"
        )
        offsets = {sequence: offset for offset, sequence in rows}
        for (acked_partition, sequence), offset in acked.items():
            if acked_partition == partition:
                assert offsets[sequence] == offset, (
                    f"ack of {partition}:{sequence} points elsewhere"
                )

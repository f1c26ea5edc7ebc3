"""A quick end-to-end check of a target: idempotent produce, read back, compare.

It is the lab's "is it alive and sane" probe, used by `eoslab lab smoke` and by the runtime
tests; the full workload, nemesis and Spark checker build on the same message idea
(producer-assigned partition and a per-partition sequence in the value).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

IDEMPOTENT = {"enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 5}


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    """Create a topic and wait until every partition has a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication)], operation_timeout=30)
    try:
        futures[topic].result(timeout=60)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            meta
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {topic} has no leader for every partition after 60 s")


@dataclass
class Ledger:
    """What the producer was told: acknowledged (partition, sequence) -> offset, and failures."""

    acked: dict[tuple[int, int], int] = field(default_factory=dict)
    ack_times: dict[tuple[int, int], float] = field(default_factory=dict)
    failed: dict[tuple[int, int], str] = field(default_factory=dict)

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        partition, sequence = (int(x) for x in message.value().decode().split(":"))
        if error is None:
            self.acked[(partition, sequence)] = message.offset()
            self.ack_times[(partition, sequence)] = time.monotonic()
        else:
            self.failed[(partition, sequence)] = error.name()

    @property
    def settled(self) -> int:
        return len(self.acked) + len(self.failed)


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    *,
    overrides: dict[str, object] | None = None,
    during: Callable[[Ledger], None] | None = None,
    max_unacked: int | None = None,
    timeout_s: float = 120.0,
) -> Ledger:
    """Send `count` records round-robin over the partitions; value = "<partition>:<sequence>".

    `during` is called after every send (to inject a fault at the right moment); with
    `max_unacked`, at most that many records are outstanding, so a fault lands mid-stream.
    """
    ledger = Ledger()
    producer = Producer(
        {"bootstrap.servers": bootstrap, **IDEMPOTENT, "linger.ms": 5, **(overrides or {})}
    )
    next_sequence = [0] * partitions
    for n in range(count):
        partition = n % partitions
        value = f"{partition}:{next_sequence[partition]}".encode()
        next_sequence[partition] += 1
        while True:
            try:
                producer.produce(
                    topic, value=value, partition=partition, on_delivery=ledger.on_delivery
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if max_unacked is not None:
            deadline = time.monotonic() + timeout_s
            while ledger.settled < n + 1 - max_unacked:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no delivery report for {timeout_s} s")
                producer.poll(0.01)
        if during is not None:
            during(ledger)
    remaining = producer.flush(timeout_s)
    if remaining:
        raise TimeoutError(f"{remaining} records still undelivered after {timeout_s} s")
    return ledger


def consume(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0
) -> dict[int, list[tuple[int, int]]]:
    """Every record of the topic, per partition, as (offset, sequence) in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eoslab-smoke-{topic}",
            "enable.auto.commit": False,
        }
    )
    ends = {}
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        ends[p] = high
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    positions = dict.fromkeys(range(partitions), 0)
    deadline = time.monotonic() + timeout_s
    try:
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            _, sequence = (int(x) for x in message.value().decode().split(":"))
            records[message.partition()].append((message.offset(), sequence))
            positions[message.partition()] = message.offset() + 1
    finally:
        consumer.close()
    return records


@dataclass(frozen=True)
class Findings:
    acked: int
    read: int
    lost: list[tuple[int, int]]
    duplicates: list[tuple[int, int]]
    reordered: list[tuple[int, int]]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.reordered)


def check(ledger: Ledger, records: dict[int, list[tuple[int, int]]]) -> Findings:
    """Every acknowledged record present once, sequences increasing per partition."""
    seen: dict[tuple[int, int], int] = {}
    duplicates, reordered = [], []
    for partition, rows in records.items():
        last = -1
        for _, sequence in rows:
            key = (partition, sequence)
            if key in seen:
                duplicates.append(key)
            seen[key] = seen.get(key, 0) + 1
            if sequence < last:
                reordered.append(key)
            last = max(last, sequence)
    lost = sorted(key for key in ledger.acked if key not in seen)
    return Findings(
        len(ledger.acked), sum(len(r) for r in records.values()), lost, duplicates, reordered
    )

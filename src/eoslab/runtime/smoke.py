"""A quick end-to-end check of a target: idempotent produce, read back, compare.

It is the lab's "is it alive and sane" probe, used by `eoslab lab smoke` and by the runtime
tests; the full workload, nemesis and Spark checker build on the same message idea
(producer-assigned partition and a per-partition sequence in the value).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from eoslab.clock import wait_until

IDEMPOTENT = {"enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 5}


def _read(message: Message) -> tuple[int, int, int]:
    """(partition, offset, sequence) of a smoke record (offset -1 before it is written)."""
    value, partition, offset = message.value(), message.partition(), message.offset()
    if value is None or partition is None:
        raise ValueError(f"not a smoke record: {message}")
    _, sequence = (int(x) for x in value.decode().split(":"))
    return partition, -1 if offset is None else offset, sequence


@dataclass
class Ledger:
    """What the producer was told: acknowledged (partition, sequence) -> offset, and failures."""

    acked: dict[tuple[int, int], int] = field(default_factory=dict)
    ack_times: dict[tuple[int, int], float] = field(default_factory=dict)
    failed: dict[tuple[int, int], str] = field(default_factory=dict)

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        partition, offset, sequence = _read(message)
        if error is None:
            self.acked[(partition, sequence)] = offset
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
            window = n + 1 - max_unacked

            def settled_enough(window: int = window) -> bool:
                producer.poll(0.01)
                return ledger.settled >= window

            if not wait_until(settled_enough, timeout_s, interval_s=0):
                raise TimeoutError(f"no delivery report for {timeout_s} s")
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
            partition, offset, sequence = _read(message)
            records[partition].append((offset, sequence))
            positions[partition] = offset + 1
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

"""End to end: a real idempotent librdkafka producer, the chaos proxy, a real Kafka broker."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

if TYPE_CHECKING:
    from conftest import ProxiedKafka

RECORDS = 300


def new_topic(kafka: ProxiedKafka) -> str:
    topic = f"chaos-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.direct_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    return topic


class DeliveryLedger:
    def __init__(self) -> None:
        self.acked: list[bytes] = []
        self.failed: list[KafkaError] = []
        self.acked_at: dict[bytes, float] = {}

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acked.append(message.value())
            self.acked_at[message.value()] = time.monotonic()
        else:
            self.failed.append(error)


def idempotent_producer(kafka: ProxiedKafka, **overrides: object) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": kafka.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 20,
        "max.in.flight.requests.per.connection": 5,
        "request.timeout.ms": 3000,
        "socket.timeout.ms": 3000,
        "message.timeout.ms": 30000,
        "retry.backoff.ms": 50,
    }
    config.update(overrides)
    return Producer(config)


def produce(
    producer: Producer, topic: str, values: list[bytes], timeout_s: float = 40
) -> DeliveryLedger:
    ledger = DeliveryLedger()
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=ledger)
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    assert remaining == 0, f"{remaining} messages neither delivered nor failed in {timeout_s}s"
    return ledger


def read_topic(
    kafka: ProxiedKafka, topic: str, timeout_s: float = 30, through_proxy: bool = False
) -> list[bytes]:
    """Every record in the topic's only partition, by default read straight from the broker."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap if through_proxy else kafka.direct_bootstrap,
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                return values
            else:
                raise AssertionError(f"consumer error: {message.error()}")
    finally:
        consumer.close()
    raise AssertionError(f"end of {topic} not reached in {timeout_s}s")


def values(count: int) -> list[bytes]:
    return [f"record-{index:05d}".encode() for index in range(count)]


def injected(kafka: ProxiedKafka, fault_id: str) -> int:
    return kafka.control.counters()["faults"][fault_id]["injected"]


def test_without_faults_every_record_is_delivered_once(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    sent = values(RECORDS)

    ledger = produce(idempotent_producer(kafka), topic, sent)

    assert ledger.failed == []
    assert sorted(ledger.acked) == sent
    assert read_topic(kafka, topic) == sent
    produce_counts = kafka.control.counters()["routes"][kafka.route]["apis"]["Produce"]
    assert produce_counts["request_frames"] >= RECORDS // 20
    assert produce_counts["response_frames"] == produce_counts["request_frames"]


def test_frames_larger_than_a_read_cross_intact_both_ways(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    large = [bytes([65 + index]) * 700_000 for index in range(4)]  # one Produce request each

    ledger = produce(idempotent_producer(kafka, **{"linger.ms": 0}), topic, large)

    assert ledger.failed == []
    assert read_topic(kafka, topic, through_proxy=True) == large


def test_lost_acks_with_reset_are_retried_and_deduplicated(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    sent = values(RECORDS)
    fault_id = kafka.control.add(
        {"kind": "drop-response", "route": kafka.route, "api": "Produce", "count": 2, "reset": True}
    )

    ledger = produce(idempotent_producer(kafka), topic, sent)

    assert ledger.failed == []
    assert read_topic(kafka, topic) == sent
    assert injected(kafka, fault_id) == 2
    logged = [json.loads(line) for line in kafka.fault_log.read_text().splitlines()]
    mine = [entry for entry in logged if entry["fault_id"] == fault_id]
    assert len(mine) == 2
    assert all(entry["kind"] == "drop-response" and entry["api"] == "Produce" for entry in mine)
    assert all(isinstance(entry["ts_ms"], int) and entry["correlation_id"] >= 0 for entry in mine)


def test_dropped_request_is_resent_and_stored_once(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    sent = values(RECORDS)
    fault_id = kafka.control.add(
        {"kind": "drop-request", "route": kafka.route, "api": "Produce", "count": 1}
    )

    ledger = produce(idempotent_producer(kafka), topic, sent)

    assert ledger.failed == []
    assert injected(kafka, fault_id) == 1
    stored = read_topic(kafka, topic)
    assert stored == sent, f"duplicates: {[v for v, n in Counter(stored).items() if n > 1][:5]}"


def test_blackhole_times_the_produce_out(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    producer = idempotent_producer(kafka, **{"message.timeout.ms": 1500})
    produce(producer, topic, values(1))  # connected and warm before the partition
    fault_id = kafka.control.add({"kind": "blackhole", "route": kafka.route})

    ledger = produce(producer, topic, [b"into-the-void"], timeout_s=20)

    assert ledger.acked == []
    assert [error.code() for error in ledger.failed] == [KafkaError._MSG_TIMED_OUT]
    assert injected(kafka, fault_id) >= 1


def test_latency_delays_every_produce_by_at_least_its_minimum(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    producer = idempotent_producer(kafka, **{"linger.ms": 0})
    produce(producer, topic, values(1))  # connection and producer id set up before measuring
    kafka.control.add(
        {
            "kind": "latency",
            "route": kafka.route,
            "api": "Produce",
            "direction": "request",
            "mean_ms": 300,
            "jitter_ms": 100,
        }
    )

    for value in (b"slow-1", b"slow-2", b"slow-3"):
        started = time.monotonic()
        ledger = produce(producer, topic, [value])
        assert ledger.failed == []
        assert ledger.acked_at[value] - started >= 0.2


def test_without_idempotence_the_same_lost_acks_duplicate_records(kafka: ProxiedKafka) -> None:
    """The negative control: the lost acks above really made the client resend."""
    topic = new_topic(kafka)
    sent = values(RECORDS)
    kafka.control.add(
        {"kind": "drop-response", "route": kafka.route, "api": "Produce", "count": 2, "reset": True}
    )
    producer = idempotent_producer(kafka, **{"enable.idempotence": False, "retries": 10})

    ledger = produce(producer, topic, sent)

    assert ledger.failed == []
    stored = read_topic(kafka, topic)
    assert set(stored) == set(sent)
    assert len(stored) > len(sent)


def test_traffic_held_by_a_blackhole_flows_once_it_is_removed(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    producer = idempotent_producer(kafka)
    produce(producer, topic, values(1))
    fault_id = kafka.control.add({"kind": "blackhole", "route": kafka.route})
    ledger = DeliveryLedger()
    producer.produce(topic, value=b"held", partition=0, on_delivery=ledger)
    producer.poll(1.0)
    assert ledger.acked == []

    kafka.control.remove(fault_id)

    assert producer.flush(20) == 0
    assert ledger.acked == [b"held"]
    assert read_topic(kafka, topic) == [*values(1), b"held"]


def test_an_immediate_reset_closes_current_connections_and_clients_reconnect(
    kafka: ProxiedKafka,
) -> None:
    topic = new_topic(kafka)
    producer = idempotent_producer(kafka)
    produce(producer, topic, values(10))
    accepted_before = kafka.control.counters()["routes"][kafka.route]["connections"]["accepted"]

    fault_id = kafka.control.add({"kind": "reset", "route": kafka.route, "immediate": True})
    ledger = produce(producer, topic, [b"after-reset"])

    assert injected(kafka, fault_id) >= 1
    assert ledger.acked == [b"after-reset"]
    connections = kafka.control.counters()["routes"][kafka.route]["connections"]
    assert connections["accepted"] > accepted_before
    assert read_topic(kafka, topic) == [*values(10), b"after-reset"]


def test_bandwidth_limits_the_produce_rate(kafka: ProxiedKafka) -> None:
    topic = new_topic(kafka)
    producer = idempotent_producer(kafka, **{"compression.type": "none"})
    produce(producer, topic, values(1))
    kafka.control.add(
        {"kind": "bandwidth", "route": kafka.route, "direction": "request", "bytes_per_s": 200_000}
    )
    payload = [bytes([index % 256]) * 1000 for index in range(300)]  # 300 kB of values

    started = time.monotonic()
    ledger = produce(producer, topic, payload)

    assert ledger.failed == []
    assert time.monotonic() - started >= 1.4  # 300 kB at 200 kB/s, minus nothing


def test_a_stream_that_is_not_kafka_is_cut_off_and_others_carry_on(kafka: ProxiedKafka) -> None:
    host, port = kafka.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as rogue:
        rogue.sendall(b"\xff\xff\xff\xf0 not a kafka frame")
        assert rogue.recv(100) == b""  # closed by the proxy

    topic = new_topic(kafka)
    ledger = produce(idempotent_producer(kafka), topic, values(5))

    assert sorted(ledger.acked) == values(5)

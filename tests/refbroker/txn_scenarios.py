"""Transaction scenarios with real clients, written once and played on any target: a private
reference broker (test_txn_clients.py) and the lab's Kafka and reference broker
(test_txn_clients_lab.py). Topics have PARTITIONS partitions (group_scenarios.py)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from group_clients import GROUP_SETTINGS, WAIT_S, wait_until
from group_scenarios import PARTITIONS, GroupTarget
from txn_clients import (
    CALL_TIMEOUT_S,
    TransactionalCopier,
    fenced,
    produce_transaction,
    read_all,
    transactional_producer,
)

from eoslab.admin import end_offsets
from eoslab.runtime.smoke import produce

TIMEOUT_MS = 3_000
"""transaction.timeout.ms of the hanging transaction (both targets abort it within a second
of that: transaction.abort.timed.out.transaction.cleanup.interval.ms is 1000 in the lab)."""


def values(tag: str, count: int) -> list[tuple[int, bytes]]:
    """`count` records spread over every partition: (partition, b"tag/n")."""
    return [(n % PARTITIONS, f"{tag}/{n}".encode()) for n in range(count)]


def flat(read: dict[int, list[bytes]]) -> list[bytes]:
    return sorted(v for partition in read.values() for v in partition)


def commit_and_abort(target: GroupTarget, topic: str, transactional_id: str) -> None:
    """Commit, abort, commit over every partition: read_committed sees exactly the committed
    records, once each, and read_uncommitted the aborted ones too; no transaction is left
    open (the last stable offsets are the high watermarks)."""
    target.new_topic(topic)
    producer = transactional_producer(target.bootstrap, transactional_id)
    produce_transaction(producer, topic, values("c", 8), commit=True)
    produce_transaction(producer, topic, values("a", 8), commit=False)
    produce_transaction(producer, topic, values("k", 4), commit=True)
    committed = sorted(v for _, v in values("c", 8) + values("k", 4))
    aborted = sorted(v for _, v in values("a", 8))
    assert flat(read_all(target.bootstrap, topic, PARTITIONS)) == committed
    assert flat(read_all(target.bootstrap, topic, PARTITIONS, "read_uncommitted")) == sorted(
        committed + aborted
    )
    stable = end_offsets(target.bootstrap, topic, PARTITIONS, "read_committed")
    assert stable == end_offsets(target.bootstrap, topic, PARTITIONS, "read_uncommitted")


def consume_transform_produce(
    target: GroupTarget, source: str, output: str, group: str, transactional_id: str
) -> None:
    """A read_committed consumer in a group and a transactional producer copy `source` to
    `output` (value + b"!") ten records per transaction, the consumer's offsets committed in
    the transaction (send_offsets_to_transaction); every third transaction is aborted and its
    input read again from the committed offsets. Every input is copied exactly once, and the
    group's committed offsets are the input's end."""
    target.new_topic(source)
    target.new_topic(output)
    total = 40
    produce(target.bootstrap, source, PARTITIONS, total)
    inputs = read_all(target.bootstrap, source, PARTITIONS)
    producer = transactional_producer(target.bootstrap, transactional_id)
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            **GROUP_SETTINGS,
        }
    )
    consumer.subscribe([source])
    copied, transactions = 0, 0
    deadline = time.monotonic() + WAIT_S
    try:
        while copied < total:
            assert time.monotonic() < deadline, f"copied {copied} of {total} in {WAIT_S} s"
            batch = [m for m in consumer.consume(10, 0.5) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce(
                    output, value=message.value() + b"!", partition=message.partition()
                )
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), CALL_TIMEOUT_S
            )
            transactions += 1
            if transactions % 3 == 2:
                producer.flush(CALL_TIMEOUT_S)  # the copies are in the log before the abort
                producer.abort_transaction(CALL_TIMEOUT_S)
                for tp in consumer.committed(consumer.assignment(), CALL_TIMEOUT_S):
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            else:
                producer.commit_transaction(CALL_TIMEOUT_S)
                copied += len(batch)
        committed = consumer.committed(
            [TopicPartition(source, p) for p in range(PARTITIONS)], CALL_TIMEOUT_S
        )
    finally:
        consumer.close()
    assert transactions >= 3  # an abort happened
    expected = {p: sorted(v + b"!" for v in vs) for p, vs in inputs.items()}
    assert {p: sorted(vs) for p, vs in read_all(target.bootstrap, output, PARTITIONS).items()} == (
        expected
    )
    assert {tp.partition: tp.offset for tp in committed} == {p: len(vs) for p, vs in inputs.items()}
    uncommitted = read_all(target.bootstrap, output, PARTITIONS, "read_uncommitted")
    assert sum(map(len, uncommitted.values())) > total  # the aborted copies are in the log


def zombie_fenced(target: GroupTarget, topic: str, transactional_id: str) -> None:
    """A second producer initialises the same transactional id while the first has a
    transaction open: the open transaction is aborted, the first producer is fenced (fatally)
    and none of its writes, before or after the fence, becomes visible; the second commits."""
    target.new_topic(topic)
    zombie = transactional_producer(target.bootstrap, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie/0", partition=0)
    zombie.flush(CALL_TIMEOUT_S)
    successor = transactional_producer(target.bootstrap, transactional_id)
    zombie.produce(topic, value=b"zombie/1", partition=0)
    zombie.produce(topic, value=b"zombie/2", partition=1)
    with pytest.raises(KafkaException) as refused:
        zombie.commit_transaction(CALL_TIMEOUT_S)
    assert fenced(refused.value), refused.value
    produce_transaction(successor, topic, [(0, b"successor/0"), (1, b"successor/1")], commit=True)
    assert flat(read_all(target.bootstrap, topic, PARTITIONS)) == [b"successor/0", b"successor/1"]
    everything = Counter(flat(read_all(target.bootstrap, topic, PARTITIONS, "read_uncommitted")))
    assert everything == Counter([b"zombie/0", b"successor/0", b"successor/1"])


def hanging_transaction_aborted(target: GroupTarget, topic: str, transactional_id: str) -> None:
    """A transaction left open past transaction.timeout.ms is aborted by the coordinator: the
    last stable offset moves past it (read_committed consumers are no longer held back) and its
    records never become visible; the late producer cannot commit it."""
    target.new_topic(topic)
    producer = transactional_producer(
        target.bootstrap, transactional_id, **{"transaction.timeout.ms": TIMEOUT_MS}
    )
    producer.begin_transaction()
    for partition, value in values("hung", 4):
        producer.produce(topic, value=value, partition=partition)
    producer.flush(CALL_TIMEOUT_S)
    assert end_offsets(target.bootstrap, topic, PARTITIONS, "read_committed") == dict.fromkeys(
        range(PARTITIONS), 0
    )  # held at the open transaction's first offset
    wait_until(
        lambda: (
            end_offsets(target.bootstrap, topic, PARTITIONS, "read_committed")
            == dict.fromkeys(range(PARTITIONS), 2)
        ),  # the record and the abort marker
        "the coordinator aborts the hanging transaction",
        timeout_s=TIMEOUT_MS / 1000 + 30,
    )
    with pytest.raises(KafkaException):
        producer.commit_transaction(CALL_TIMEOUT_S)
    assert flat(read_all(target.bootstrap, topic, PARTITIONS)) == []
    assert len(flat(read_all(target.bootstrap, topic, PARTITIONS, "read_uncommitted"))) == 4


def java_transactional_copy(
    target: GroupTarget,
    source: str,
    output: str,
    log_dir: Path,
    transactional_id: str,
    *,
    lib: Path | None = None,
) -> TransactionalCopier:
    """Kafka's own TransactionalMessageCopier (the Java client 3.9, or the one of the jars in
    ``lib``) copies `source` to `output` with random aborts: read_committed sees every input
    exactly once, in order per partition. The copier, for what its log says."""
    target.new_topic(source)
    target.new_topic(output)
    produce(target.bootstrap, source, PARTITIONS, 60)
    inputs = read_all(target.bootstrap, source, PARTITIONS)
    copier = TransactionalCopier(
        target.bootstrap,
        source,
        output,
        group=f"{transactional_id}-group",
        transactional_id=transactional_id,
        messages=60,
        log_dir=log_dir,
        lib=lib,
    )
    statuses = copier.run()
    assert statuses[-1]["stage"] == "ShutdownComplete"
    assert statuses[-1]["totalProcessed"] == 60
    assert read_all(target.bootstrap, output, PARTITIONS) == inputs
    return copier

"""Real transactional clients on a private reference broker: librdkafka commits, aborts,
copies consume-transform-produce with its offsets in the transaction, is fenced by a second
producer with its transactional id, has a hanging transaction aborted; Kafka's Java client
copies transactionally; and a kill -9 of the broker mid-transaction (it runs --fsync
every-batch, its default) leaves the transaction to be committed, or fenced and aborted, by
the restarted broker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from group_scenarios import PARTITIONS, GroupTarget
from refbroker_process import FAST_JOIN, RunningBroker, StartBroker
from txn_clients import CALL_TIMEOUT_S, read_all, transactional_producer
from txn_scenarios import (
    commit_and_abort,
    consume_transform_produce,
    flat,
    hanging_transaction_aborted,
    java_transactional_copy,
    values,
    zombie_fenced,
)

from eoslab.admin import end_offsets

FAST_ABORT = ("--transaction-abort-timed-out-transaction-cleanup-interval-ms", "1000")
"""Timed-out transactions are aborted within a second, as in the lab (Kafka's default: 10 s)."""


@pytest.fixture
def broker(start_refbroker: StartBroker) -> RunningBroker:
    return start_refbroker(*FAST_JOIN, *FAST_ABORT)


def target_of(broker: RunningBroker) -> GroupTarget:
    return GroupTarget("refbroker", broker.bootstrap)


def test_librdkafka_commits_and_aborts(broker: RunningBroker) -> None:
    commit_and_abort(target_of(broker), "txn", "tx-commit-abort")
    requests = broker.counters()["requests"]
    assert requests["EndTxn"] == 3
    assert requests["AddPartitionsToTxn"] >= 3


def test_librdkafka_consume_transform_produce(broker: RunningBroker) -> None:
    consume_transform_produce(target_of(broker), "ctp-in", "ctp-out", "g-ctp", "tx-ctp")
    assert broker.counters()["requests"]["TxnOffsetCommit"] >= 3


def test_a_zombie_producer_is_fenced(broker: RunningBroker) -> None:
    zombie_fenced(target_of(broker), "zombie", "tx-zombie")


def test_a_hanging_transaction_is_aborted_by_the_coordinator(broker: RunningBroker) -> None:
    hanging_transaction_aborted(target_of(broker), "hanging", "tx-hanging")


def test_the_java_client_copies_transactionally(broker: RunningBroker, tmp_path: Path) -> None:
    java_transactional_copy(target_of(broker), "java-in", "java-out", tmp_path, "tx-java")


def kill_9(broker: RunningBroker) -> None:
    broker.kill()
    broker.start()


def crash_restart(broker: RunningBroker) -> None:
    """The crash-restart fault: the same process forgets everything and recovers from disk."""
    broker.fault(kind="crash-restart")


def open_transaction_then_kill(
    broker: RunningBroker,
    topic: str,
    transactional_id: str,
    restart: Callable[[RunningBroker], None] = kill_9,
) -> Producer:
    """A producer writes a transaction into every partition (acknowledged: on disk), and the
    broker is killed (SIGKILL) and restarted on the same data before it is ended."""
    target_of(broker).new_topic(topic)
    producer = transactional_producer(broker.bootstrap, transactional_id)
    producer.begin_transaction()
    for partition, value in values("open", 8):
        producer.produce(topic, value=value, partition=partition)
    producer.flush(CALL_TIMEOUT_S)
    restart(broker)
    held = end_offsets(broker.bootstrap, topic, PARTITIONS, "read_committed")
    assert held == dict.fromkeys(range(PARTITIONS), 0)  # still open after the restart
    return producer


@pytest.mark.parametrize("restart", [kill_9, crash_restart])
def test_kill_9_mid_transaction_then_the_producer_commits(
    broker: RunningBroker, restart: Callable[[RunningBroker], None]
) -> None:
    """The transaction's state (Ongoing, its partitions) and the partitions' open transactions
    survived: the same producer commits after the restart and every record is visible once."""
    producer = open_transaction_then_kill(broker, "killed-commit", "tx-killed-commit", restart)
    producer.commit_transaction(CALL_TIMEOUT_S)
    assert flat(read_all(broker.bootstrap, "killed-commit", PARTITIONS)) == sorted(
        v for _, v in values("open", 8)
    )


def test_kill_9_mid_transaction_then_a_new_producer_aborts_it(broker: RunningBroker) -> None:
    """The producer dies with the broker; its successor's InitProducerId on the restarted
    broker fences the open transaction and aborts it: nothing of it becomes visible, and the
    last stable offsets move past it."""
    open_transaction_then_kill(broker, "killed-abort", "tx-killed-abort")
    successor = transactional_producer(broker.bootstrap, "tx-killed-abort")
    successor.begin_transaction()
    successor.produce("killed-abort", value=b"after", partition=0)
    successor.commit_transaction(CALL_TIMEOUT_S)
    assert flat(read_all(broker.bootstrap, "killed-abort", PARTITIONS)) == [b"after"]
    stable = end_offsets(broker.bootstrap, "killed-abort", PARTITIONS, "read_committed")
    assert stable == end_offsets(broker.bootstrap, "killed-abort", PARTITIONS, "read_uncommitted")

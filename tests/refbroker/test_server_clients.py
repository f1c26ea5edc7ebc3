"""Real librdkafka clients against the reference broker: exactly once, in order, through faults."""

from __future__ import annotations

from real_clients import BATCHING, MAX_UNACKED, assert_exactly_once_in_order
from refbroker_process import RunningBroker, StartBroker

from eoslab.runtime.smoke import Ledger, consume, produce

PARTITIONS = 3
WINDOW = {"overrides": BATCHING, "max_unacked": MAX_UNACKED}
STREAMED = 3000
"""Records of the kill -9 stream, a third of them acknowledged before the kill (the soak runs a
hundred kills: `make soak`, and a few in tests/soak/test_soak.py)."""


def test_idempotent_producer_then_assign_consumer_reads_each_record_once(
    refbroker: RunningBroker,
) -> None:
    refbroker.create_topic("roundtrip", PARTITIONS)
    delivered = produce(refbroker.bootstrap, "roundtrip", PARTITIONS, 3000, overrides=BATCHING)

    assert not delivered.failed
    assert len(delivered.acked) == 3000
    records = consume(refbroker.bootstrap, "roundtrip", PARTITIONS)
    assert_exactly_once_in_order(records, delivered.acked, 1000)
    counters = refbroker.counters()
    assert counters["produce"]["deduplicated"] == 0
    assert counters["requests"]["InitProducerId"] == 1


def test_lost_acks_are_retried_and_answered_from_the_batch_cache(refbroker: RunningBroker) -> None:
    """003_* fig. 3: the broker applied the batches, the acks never arrived, the retries are
    duplicates of cached batches: acknowledged with their original offsets, not appended."""
    refbroker.create_topic("lost-acks", PARTITIONS)
    armed = False

    def lose_acks_midway(log: Ledger) -> None:
        nonlocal armed
        if not armed and len(log.acked) >= 300:
            refbroker.fault(kind="drop-response", api="Produce", count=3)
            armed = True

    delivered = produce(
        refbroker.bootstrap, "lost-acks", PARTITIONS, 1500, during=lose_acks_midway, **WINDOW
    )

    assert armed
    assert not delivered.failed
    counters = refbroker.counters()
    assert counters["faults"]["responses_dropped"] == {"Produce": 3}
    assert counters["produce"]["deduplicated"] >= 1
    records = consume(refbroker.bootstrap, "lost-acks", PARTITIONS)
    assert_exactly_once_in_order(records, delivered.acked, 500)


def test_kill_9_and_restart_while_streaming_loses_and_duplicates_nothing(
    start_refbroker: StartBroker,
) -> None:
    broker = start_refbroker()
    broker.create_topic("crash", PARTITIONS)
    crashed = False

    def kill_and_restart_midway(log: Ledger) -> None:
        nonlocal crashed
        if not crashed and len(log.acked) >= 1000:
            broker.kill()
            broker.start()
            crashed = True

    delivered = produce(
        broker.bootstrap, "crash", PARTITIONS, STREAMED, during=kill_and_restart_midway, **WINDOW
    )

    assert crashed
    assert not delivered.failed
    assert len(delivered.acked) == STREAMED
    records = consume(broker.bootstrap, "crash", PARTITIONS)
    assert_exactly_once_in_order(records, delivered.acked, STREAMED // PARTITIONS)

"""The seeds' sequence flows (003_* figs. 2-5, 000_*, 002_*) on the reference broker alone, as
the probe plays them (eoslab.probe.flows), checked against the broker's own counters too."""

from __future__ import annotations

from crafted import batch_of, errors_of, init_producer_id, logged_records, produce_request
from real_clients import BATCHING, MAX_UNACKED, assert_exactly_once_in_order
from refbroker_process import HOST, RunningBroker, StartBroker

from eoslab.probe.flows import FIG2, FIG3, FIG4, FIG5, KIP360, SEQ_JUMP, Flow
from eoslab.probe.runner import FlowRun, run_flow
from eoslab.probe.targets import refbroker_target
from eoslab.runtime.smoke import Ledger, consume, produce

OOOSN = "OUT_OF_ORDER_SEQUENCE_NUMBER"


def play(broker: RunningBroker, flow: Flow, topic: str) -> FlowRun:
    broker.create_topic(topic, 1)
    target = refbroker_target(broker.bootstrap, f"http://{HOST}:{broker.control_port}")
    return run_flow(flow, target, topic)


def answers(run: FlowRun) -> list[tuple[str | None, int | None]]:
    """(error, base offset) of every Produce answer."""
    return [(e.error, e.base_offset) for e in run.produced()]


def once_each(run: FlowRun, tags: str) -> list[tuple[str, int]]:
    return [(tag, index) for tag in tags for index in range(run.flow.group(tag).count)]


def test_fig2_five_batches_in_two_flights_are_appended_in_order(refbroker: RunningBroker) -> None:
    run = play(refbroker, FIG2, "fig2")
    assert answers(run) == [("NONE", 0), ("NONE", 7), ("NONE", 11), ("NONE", 19), ("NONE", 29)]
    with refbroker.client() as client:
        assert logged_records(client, "fig2") == once_each(run, "ABCDE")


def test_fig3_lost_acks_resent_batches_get_their_original_offsets(refbroker: RunningBroker) -> None:
    run = play(refbroker, FIG3, "fig3")
    assert [e.ack_lost for e in run.produced()] == [False] * 3 + [True] * 2 + [False] * 2
    assert answers(run)[-2:] == [("NONE", 19), ("NONE", 29)]
    with refbroker.client() as client:
        assert logged_records(client, "fig3") == once_each(run, "ABCDE")
    produce_counts = refbroker.counters()["produce"]
    assert produce_counts["appended"] == 5
    assert produce_counts["deduplicated"] == 2


def test_the_drop_response_fault_swallows_acks_without_closing(refbroker: RunningBroker) -> None:
    """The broker-side lost ack (the probe's flows read and ignore theirs instead)."""
    refbroker.create_topic("dropped", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        refbroker.fault(kind="drop-response", api="produce", count=2, reset=False)
        lost = [
            client.send(produce_request("dropped", 0, batch_of(pid, epoch, seq, seq, "v")))
            for seq in (0, 1)
        ]
        assert client.unanswered() == lost
        answered = client.request(produce_request("dropped", 0, batch_of(pid, epoch, 2, 2, "v")))
        assert errors_of([answered]) == ["NONE"]
        assert answered.responses[0].partition_responses[0].base_offset == 2


def test_fig4_a_lost_batch_makes_the_following_ones_out_of_order(refbroker: RunningBroker) -> None:
    run = play(refbroker, FIG4, "fig4")
    assert [error for error, _ in answers(run)] == ["NONE", "NONE", OOOSN, OOOSN] + ["NONE"] * 3
    with refbroker.client() as client:  # complete, in order, once
        assert logged_records(client, "fig4") == once_each(run, "ABCDE")


def test_fig5_six_in_flight_first_ack_lost_duplicates_after_the_epoch_bump(
    refbroker: RunningBroker,
) -> None:
    run = play(refbroker, FIG5, "fig5")
    assert [error for error, _ in answers(run)] == ["NONE"] * 6 + [OOOSN, "NONE"]
    with refbroker.client() as client:  # A twice: the duplicate
        assert logged_records(client, "fig5") == once_each(run, "ABCDEF") + once_each(run, "A")


def test_000_sequence_jump_is_out_of_order_and_leaves_the_log_untouched(
    refbroker: RunningBroker,
) -> None:
    run = play(refbroker, SEQ_JUMP, "seq-jump")
    assert [error for error, _ in answers(run)] == ["NONE", "NONE", OOOSN, "NONE"]
    with refbroker.client() as client:
        assert logged_records(client, "seq-jump") == [("a", 0), ("b", 0), ("c", 0)]
    assert refbroker.counters()["produce"]["rejected"] == {OOOSN: 1}


def expire_then_continue(broker: RunningBroker) -> str:
    """Sequences 0, 1 accepted; the producer state expired; then sequence 2: the verdict."""
    run = play(broker, KIP360, "kip360")
    (removal,) = [e for e in run.exchanges if e.api == "control:expire-producers"]
    assert removal.detail == {"removed": 1}
    first, second, after = answers(run)
    assert [first[0], second[0]] == ["NONE", "NONE"]
    assert after[0] is not None
    return after[0]


def test_002_unknown_producer_id_under_kafka_2_0_rules(start_refbroker: StartBroker) -> None:
    assert expire_then_continue(start_refbroker("--rules", "kafka-2.0")) == "UNKNOWN_PRODUCER_ID"


def test_002_kafka_3_9_accepts_the_same_batch(refbroker: RunningBroker) -> None:
    assert expire_then_continue(refbroker) == "NONE"


def test_002_librdkafka_recovers_from_unknown_producer_id(start_refbroker: StartBroker) -> None:
    broker = start_refbroker("--rules", "kafka-2.0")
    broker.create_topic("kip360-client", 1)
    expired = False

    def expire_midway(log: Ledger) -> None:
        nonlocal expired
        if not expired and len(log.acked) >= 500:
            broker.fault(kind="expire-producers")
            expired = True

    delivered = produce(
        broker.bootstrap,
        "kip360-client",
        1,
        2000,
        during=expire_midway,
        overrides=BATCHING,
        max_unacked=MAX_UNACKED,
    )

    assert expired
    assert not delivered.failed
    assert broker.counters()["produce"]["rejected"].get("UNKNOWN_PRODUCER_ID", 0) >= 1
    records = consume(broker.bootstrap, "kip360-client", 1)
    assert_exactly_once_in_order(records, delivered.acked, 2000)

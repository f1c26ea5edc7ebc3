"""The seeds' sequence flows, replayed with crafted Produce requests (003_* figs. 2-5, 000_*, 002_*)."""

from __future__ import annotations

from crafted import batch_of, errors_of, fetch_values, init_producer_id, produce_request
from real_clients import assert_exactly_once_in_order, consume_all, produce

from conftest import RunningBroker, StartBroker
from eoslab.probe.client import KafkaProtocolClient

# The figures' batches: tag -> (first sequence, last sequence)
A, B, C, D, E, F = (114, 120), (121, 124), (125, 132), (133, 142), (143, 150), (151, 155)
FIGURE = {"A": A, "B": B, "C": C, "D": D, "E": E, "F": F}


def send_batches(
    client: KafkaProtocolClient, topic: str, pid: int, epoch: int, tags: str
) -> list[int]:
    """Pipeline one Produce request per tagged batch (all in flight at once)."""
    return [
        client.send(produce_request(topic, 0, batch_of(pid, epoch, *FIGURE[tag], tag)))
        for tag in tags
    ]


def figure_values(tags: str) -> list[bytes]:
    values = []
    for tag in tags:
        first, last = FIGURE[tag]
        values += [f"{tag}/{seq}".encode() for seq in range(first, last + 1)]
    return values


def test_fig2_five_batches_in_two_flights_are_appended_in_order(refbroker: RunningBroker) -> None:
    refbroker.create_topic("fig2", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        send_batches(client, "fig2", pid, epoch, "ABC")
        first_flight = [client.receive() for _ in range(3)]
        send_batches(client, "fig2", pid, epoch, "DE")
        second_flight = [client.receive() for _ in range(2)]
        responses = first_flight + second_flight

        assert errors_of(responses) == ["NONE"] * 5
        base_offsets = [r.responses[0].partition_responses[0].base_offset for r in responses]
        assert base_offsets == [0, 7, 11, 19, 29]
        assert fetch_values(client, "fig2") == figure_values("ABCDE")


def test_fig3_lost_acks_resent_batches_get_their_original_offsets(refbroker: RunningBroker) -> None:
    refbroker.create_topic("fig3", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        send_batches(client, "fig3", pid, epoch, "ABC")
        assert errors_of([client.receive() for _ in range(3)]) == ["NONE"] * 3
        refbroker.fault(kind="drop-responses", api="produce", count=2, close_connection=False)
        lost = send_batches(client, "fig3", pid, epoch, "DE")
        assert client.unanswered() == lost

    with refbroker.client() as retry:  # the producer gave up on the connection and resends
        send_batches(retry, "fig3", pid, epoch, "DE")
        responses = [retry.receive() for _ in range(2)]

        assert errors_of(responses) == ["NONE", "NONE"]
        assert [r.responses[0].partition_responses[0].base_offset for r in responses] == [19, 29]
        assert fetch_values(retry, "fig3") == figure_values("ABCDE")
    produce_counts = refbroker.counters()["produce"]
    assert produce_counts["appended"] == 5
    assert produce_counts["deduplicated"] == 2


def test_fig4_a_lost_batch_makes_the_following_ones_out_of_order(refbroker: RunningBroker) -> None:
    refbroker.create_topic("fig4", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        send_batches(client, "fig4", pid, epoch, "ABDE")  # C never reached the broker
        assert errors_of([client.receive() for _ in range(4)]) == [
            "NONE",
            "NONE",
            "OUT_OF_ORDER_SEQUENCE_NUMBER",
            "OUT_OF_ORDER_SEQUENCE_NUMBER",
        ]
        # The producer bumps its epoch and resends C, D, E from sequence 0.
        bumped = {"C": (0, 7), "D": (8, 17), "E": (18, 25)}
        for tag in "CDE":
            batch = batch_of(pid, epoch + 1, *bumped[tag], tag, first_value=FIGURE[tag][0])
            client.send(produce_request("fig4", 0, batch))
        assert errors_of([client.receive() for _ in range(3)]) == ["NONE"] * 3

        assert fetch_values(client, "fig4") == figure_values("ABCDE")  # complete, in order, once


def test_fig5_six_in_flight_first_ack_lost_duplicates_after_the_epoch_bump(
    refbroker: RunningBroker,
) -> None:
    refbroker.create_topic("fig5", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        refbroker.fault(kind="drop-responses", api="produce", count=1, close_connection=False)
        send_batches(client, "fig5", pid, epoch, "ABCDEF")
        assert errors_of([client.receive() for _ in range(5)]) == ["NONE"] * 5  # B..F

        retry = client.request(produce_request("fig5", 0, batch_of(pid, epoch, *A, "A")))
        assert errors_of([retry]) == ["OUT_OF_ORDER_SEQUENCE_NUMBER"]  # A left the 5-batch cache

        bumped_a = batch_of(pid, epoch + 1, 0, 6, "A", first_value=A[0])
        assert errors_of([client.request(produce_request("fig5", 0, bumped_a))]) == ["NONE"]

        values = fetch_values(client, "fig5")
        assert values == figure_values("ABCDEF") + figure_values("A")  # A twice: the duplicate


def test_000_sequence_jump_is_out_of_order_and_leaves_the_log_untouched(
    refbroker: RunningBroker,
) -> None:
    refbroker.create_topic("seq-jump", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        first = client.request(produce_request("seq-jump", 0, batch_of(pid, epoch, 0, 0, "v")))
        jump = client.request(produce_request("seq-jump", 0, batch_of(pid, epoch, 111, 111, "v")))
        right = client.request(produce_request("seq-jump", 0, batch_of(pid, epoch, 1, 1, "v")))

        assert errors_of([first, jump, right]) == ["NONE", "OUT_OF_ORDER_SEQUENCE_NUMBER", "NONE"]
        assert fetch_values(client, "seq-jump") == [b"v/0", b"v/1"]
    assert refbroker.counters()["produce"]["rejected"] == {"OUT_OF_ORDER_SEQUENCE_NUMBER": 1}


def expire_then_continue(broker: RunningBroker, topic: str) -> str:
    """Sequences 0, 1 accepted; the producer state expired; then sequence 2: the verdict."""
    broker.create_topic(topic, 1)
    with broker.client() as client:
        pid, epoch = init_producer_id(client)
        for seq in (0, 1):
            ok = client.request(produce_request(topic, 0, batch_of(pid, epoch, seq, seq, "v")))
            assert errors_of([ok]) == ["NONE"]
        assert broker.fault(kind="expire-producers", producer_id=pid)["removed"] == 1
        after = client.request(produce_request(topic, 0, batch_of(pid, epoch, 2, 2, "v")))
        return errors_of([after])[0]


def test_002_unknown_producer_id_under_kafka_2_0_rules(start_refbroker: StartBroker) -> None:
    assert expire_then_continue(start_refbroker("--rules", "kafka-2.0"), "kip360") == (
        "UNKNOWN_PRODUCER_ID"
    )


def test_002_kafka_3_9_accepts_the_same_batch(refbroker: RunningBroker) -> None:
    assert expire_then_continue(refbroker, "kip360") == "NONE"


def test_002_librdkafka_recovers_from_unknown_producer_id(start_refbroker: StartBroker) -> None:
    broker = start_refbroker("--rules", "kafka-2.0")
    broker.create_topic("kip360-client", 1)
    expired = False

    def expire_midway(log: object) -> None:
        nonlocal expired
        acked = len(log.acked)  # type: ignore[attr-defined]
        if not expired and acked >= 500:
            broker.fault(kind="expire-producers")
            expired = True

    delivered = produce(broker.bootstrap, "kip360-client", 1, 2000, during=expire_midway)

    assert expired
    assert not delivered.failed
    assert broker.counters()["produce"]["rejected"].get("UNKNOWN_PRODUCER_ID", 0) >= 1
    records = consume_all(broker.bootstrap, "kip360-client", 1)
    assert_exactly_once_in_order(records, delivered.acked, 2000)

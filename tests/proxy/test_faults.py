"""Which frames a fault selects and fires on, and what the verdict does; with a fake clock."""

import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from eoslab.kafka_api import encode_request
from eoslab.proxy.faults.late import cluster_of
from eoslab.proxy.faults.results import answer_errors, error_response
from eoslab.proxy.faults.spec import Direction, FrameContext, FrameVerdict, LateCopy
from eoslab.proxy.faults.table import FaultTable

ROUTES = ("kafka-1", "kafka-2")
PRODUCE, METADATA, ADD_PARTITIONS_TO_TXN = 0, 3, 24


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def frame(
    correlation_id: int = 1,
    route: str = "kafka-1",
    direction: Direction = Direction.RESPONSE,
    api_key: int = PRODUCE,
    size: int = 100,
) -> FrameContext:
    return FrameContext(route, direction, api_key, 9, correlation_id, size)


def judged(table: FaultTable, context: FrameContext) -> FrameVerdict:
    """The verdict on a frame some fault fired on."""
    verdict = table.judge(context, table.for_route(context.route))
    assert verdict is not None
    return verdict


def verdicts(table: FaultTable, frames: list[FrameContext]) -> list[int]:
    """Correlation ids of the frames on which some fault fired."""
    return [
        item.correlation_id
        for item in frames
        if table.judge(item, table.for_route(item.route)) is not None
    ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def table(clock: FakeClock) -> FaultTable:
    return FaultTable(ROUTES, seed=42, clock=clock)


def test_selection_by_route_api_and_direction(table: FaultTable) -> None:
    table.add({"kind": "drop-response", "route": "kafka-2", "api": "Produce"})

    assert table.for_route("kafka-1") == ()
    assert verdicts(
        table,
        [
            frame(1, route="kafka-2"),
            frame(2, route="kafka-2", api_key=METADATA),
            frame(3, route="kafka-2", direction=Direction.REQUEST),
            frame(4, route="kafka-2"),
        ],
    ) == [1, 4]


def test_count_fires_on_the_next_n_matching_frames_only(table: FaultTable) -> None:
    fault = table.add({"kind": "drop-request", "api": "Produce", "count": 2})
    requests = [frame(i, direction=Direction.REQUEST, api_key=i % 2 * METADATA) for i in range(8)]

    assert verdicts(table, requests) == [0, 2]
    assert (fault.matched, fault.injected, fault.exhausted) == (4, 2, True)


def test_same_seed_and_frames_give_the_same_injections(clock: FakeClock) -> None:
    frames = [frame(i) for i in range(200)]
    spec = {"kind": "drop-response", "probability": 0.3}

    def run(seed: int) -> list[int]:
        table = FaultTable(ROUTES, seed=seed, clock=clock)
        table.add(spec)
        return verdicts(table, frames)

    first, again, other_seed = run(7), run(7), run(8)

    assert first == again
    assert first != other_seed
    assert 30 < len(first) < 90  # about 0.3 of 200


def test_a_fault_seed_overrides_the_proxy_seed(clock: FakeClock) -> None:
    frames = [frame(i) for i in range(100)]
    spec = {"kind": "drop-response", "probability": 0.5, "seed": 5}
    tables = [FaultTable(ROUTES, seed=proxy_seed, clock=clock) for proxy_seed in (1, 2)]
    for table in tables:
        table.add(spec)

    assert verdicts(tables[0], frames) == verdicts(tables[1], frames)


def test_relative_window_bounds_the_fault(table: FaultTable, clock: FakeClock) -> None:
    table.add({"kind": "delay", "ms": 10, "start_ms": 1000, "end_ms": 2000})

    fired = []
    for step in range(6):  # at 0, 0.5, ..., 2.5 s after the fault was added
        fired.append(bool(verdicts(table, [frame(step)])))
        clock.now += 0.5

    assert fired == [False, False, True, True, False, False]


def test_latency_stays_within_mean_plus_minus_jitter(table: FaultTable, clock: FakeClock) -> None:
    table.add({"kind": "latency", "mean_ms": 50, "jitter_ms": 20})

    delays = [(judged(table, frame(i)).deliver_at or 0.0) - clock.now for i in range(300)]

    assert all(0.030 <= delay <= 0.070 for delay in delays)
    assert max(delays) - min(delays) > 0.02  # jitter is applied


def test_delays_add_up(table: FaultTable, clock: FakeClock) -> None:
    table.add({"kind": "delay", "ms": 100})
    table.add({"kind": "delay", "ms": 50, "direction": "response"})

    verdict = judged(table, frame())

    assert verdict.deliver_at == pytest.approx(clock.now + 0.150)
    assert [fault.id for fault, _ in verdict.hits] == ["f1", "f2"]


def test_bandwidth_spaces_frames_by_their_size(table: FaultTable, clock: FakeClock) -> None:
    table.add({"kind": "bandwidth", "bytes_per_s": 1000, "direction": "request"})

    releases = [
        (judged(table, frame(i, direction=Direction.REQUEST, size=500)).deliver_at or 0.0)
        - clock.now
        for i in range(3)
    ]

    assert releases == pytest.approx([0.5, 1.0, 1.5])


def test_a_dropped_frame_is_seen_by_no_later_fault(table: FaultTable) -> None:
    drop = table.add({"kind": "drop-response", "reset": True})
    delay = table.add({"kind": "delay", "ms": 10})

    verdict = judged(table, frame())

    assert (verdict.drop, verdict.reset, verdict.deliver_at) == (True, True, None)
    assert (drop.injected, delay.matched) == (1, 0)


def test_reset_on_a_matching_frame(table: FaultTable) -> None:
    table.add({"kind": "reset", "api": "Metadata", "direction": "request", "count": 1})

    verdict = judged(table, frame(direction=Direction.REQUEST, api_key=METADATA))

    assert verdict.reset
    assert not verdict.drop


def test_blackhole_holds_frames_of_its_route_until_its_window_ends(
    table: FaultTable, clock: FakeClock
) -> None:
    table.add({"kind": "blackhole", "route": "kafka-2", "end_ms": 3000})

    assert table.blackhole_end("kafka-1") is None
    assert table.blackhole_end("kafka-2") == pytest.approx(clock.now + 3)
    assert judged(table, frame(route="kafka-2")).hold
    clock.now += 3
    assert table.blackhole_end("kafka-2") is None


def test_ids_are_sequential_and_removal_reaches_the_route_cache(table: FaultTable) -> None:
    changes = []
    table.on_change(lambda: changes.append(1))
    first = table.add({"kind": "delay", "ms": 1})
    second = table.add({"kind": "delay", "ms": 2})
    assert len(table.for_route("kafka-1")) == 2

    assert table.remove(first.id)
    assert not table.remove(first.id)
    assert table.for_route("kafka-1") == (second,)
    table.clear()
    assert table.for_route("kafka-1") == ()
    assert (first.id, second.id, len(changes)) == ("f1", "f2", 4)


def test_evidence_counts_what_each_fault_did_per_api_and_connection(table: FaultTable) -> None:
    drop = table.add({"kind": "drop-response", "api": "Produce", "count": 2})
    delay = table.add({"kind": "delay", "ms": 20, "api": "Metadata"})
    idle = table.add({"kind": "reset", "api": "FindCoordinator"})
    for correlation, connection in ((1, 4), (2, 5), (3, 5)):
        item = frame(correlation)
        table.judge(
            FrameContext(item.route, item.direction, PRODUCE, 9, correlation, 100, connection),
            table.for_route("kafka-1"),
        )
    table.judge(
        FrameContext("kafka-1", Direction.RESPONSE, METADATA, 9, 4, 100, 6),
        table.for_route("kafka-1"),
    )

    dropped = drop.evidence()
    assert (dropped.matched, dropped.injected) == (3, 2)
    assert dropped.frames == {"Produce": {"4": 1, "5": 1}}
    assert drop.spec.took_effect(dropped) == (
        True,
        "swallowed responses: 2 Produce on 2 connection(s)",
    )
    delayed = delay.evidence()
    assert delayed.delay_ms == pytest.approx(20)
    assert delay.spec.took_effect(delayed) == (
        True,
        "delayed 1 Metadata on 1 connection(s), 20 ms added in all",
    )
    assert idle.spec.took_effect(idle.evidence()) == (
        False,
        "reset never fired (no matching traffic)",
    )
    listed = drop.describe()["evidence"]  # as the control API lists it
    assert isinstance(listed, dict)
    assert listed["frames"] == {"Produce": {"4": 1, "5": 1}}


def produce_response(correlation_id: int, partitions: tuple[int, ...]) -> FrameContext:
    """A Produce v9 response frame, every partition of topic "orders" written (NONE)."""
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name=TopicName("orders"),
                partition_data=tuple(
                    PartitionProduceData(index=i32(p), records=Records(b"")) for p in partitions
                ),
            ),
        ),
    )
    answer = error_response(encode_request(request, correlation_id, "t"), ErrorCode.none)
    assert answer is not None
    data = answer.frame
    return FrameContext(
        "kafka-1", Direction.RESPONSE, PRODUCE, 9, correlation_id, len(data), 3, data
    )


def test_an_error_rewrite_counts_only_responses_carrying_its_partition(table: FaultTable) -> None:
    fault = table.add(
        {
            "kind": "error",
            "api": "Produce",
            "partition": 1,
            "error": "OUT_OF_ORDER_SEQUENCE_NUMBER",
            "mode": "rewrite",
            "count": 2,
        }
    )
    faults = table.for_route("kafka-1")

    verdicts = [table.judge(produce_response(i, p), faults) for i, p in ((1, (0,)), (2, (0, 1)))]

    assert verdicts[0] is None
    assert verdicts[1] is not None
    assert answer_errors(verdicts[1].replace or b"", PRODUCE, 9) == {
        "orders:0": "NONE",
        "orders:1": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    }
    evidence = fault.evidence()
    assert (evidence.matched, evidence.injected) == (1, 1)
    assert evidence.results == {"Produce": {"orders:1": 1}}
    assert (evidence.errors, evidence.replaced) == (
        {"OUT_OF_ORDER_SEQUENCE_NUMBER": 1},
        {"NONE": 1},
    )
    assert fault.spec.took_effect(evidence) == (
        False,
        "acted 1 of 2 times (1 short): rewrote the responses to 1 Produce request(s) on 1 "
        "connection(s): 1 result(s) now OUT_OF_ORDER_SEQUENCE_NUMBER (orders:1; were NONE x1)",
    )
    table.judge(produce_response(3, (1,)), faults)
    assert fault.spec.took_effect(fault.evidence())[0]


def test_an_error_reject_answers_in_the_brokers_place_and_passes_unknown_versions(
    table: FaultTable,
) -> None:
    fault = table.add({"kind": "error", "api": "InitProducerId", "error": 7, "mode": "reject"})
    request = InitProducerIdRequest(
        transactional_id=None,
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
    )
    data = encode_request(request, 11, "t")
    known = FrameContext("kafka-1", Direction.REQUEST, 22, 4, 11, len(data), 2, data)
    unknown = FrameContext(
        "kafka-1", Direction.REQUEST, 22, 99, 12, 12, 2, data[:4] + b"\x00\x16\x00\x63" + data[8:]
    )

    verdict = table.judge(known, table.for_route("kafka-1"))

    assert verdict is not None
    assert verdict.drop
    assert answer_errors(verdict.answer or b"", 22, 4) == {"": "REQUEST_TIMED_OUT"}
    assert table.judge(unknown, table.for_route("kafka-1")) is None
    evidence = fault.evidence()
    assert evidence.unencodable == {"InitProducerId v99": 1}
    assert fault.spec.took_effect(evidence) == (
        True,
        "answered 1 InitProducerId request(s) on 1 connection(s): 1 result(s) now "
        "REQUEST_TIMED_OUT (the response); passed on untouched, versions it cannot encode: "
        "1 InitProducerId v99",
    )


def test_a_late_copy_is_released_by_the_answer_to_the_next_request_of_its_after_api(
    table: FaultTable,
) -> None:
    fault = table.add(
        {
            "kind": "late",
            "route": "kafka-1",
            "api": "Produce",
            "forward": False,
            "after_api": "EndTxn",
        }
    )
    its_answer = produce_response(4, (0,))
    produce = FrameContext("kafka-1", Direction.REQUEST, PRODUCE, 9, 4, 10, 3, b"produce")
    end_txn = [FrameContext("kafka-2", direction, 26, 3, 9, 10, 5, b"") for direction in Direction]
    assert table.for_route("kafka-2") == (fault,)  # it watches every route

    assert table.judge(end_txn[1], table.for_route("kafka-2")) is None  # before any capture
    verdict = table.judge(produce, table.for_route("kafka-1"))
    assert verdict is not None
    assert verdict.drop
    assert table.judge(its_answer, table.for_route("kafka-1")) is None  # requests are copied
    copy = fault.evidence().late[0]
    assert (copy.api, copy.connection, copy.correlation_id, copy.forwarded) == (
        "Produce",
        3,
        4,
        False,
    )
    assert fault.spec.took_effect(fault.evidence()) == (
        False,
        "captured 1 Produce request(s) (held back), 0 delivered late and answered; waiting for "
        "the next EndTxn request to be answered",
    )
    for frame in end_txn:
        table.judge(frame, table.for_route("kafka-2"))

    assert fault.evidence().late[0].released_ms is not None
    assert fault.state.copies[0].frame == b"produce"


def test_a_late_copy_is_released_by_its_own_clusters_traffic_only(table: FaultTable) -> None:
    """The lab's proxy fronts every target: in lanes another target's cell sends its own
    requests, and its Produce is not the next transaction's first (kafka-17754 in `make
    conformance`: released 6 and 24 ms after the capture, before that transaction began)."""
    fault = table.add(
        {"kind": "late", "route": "kafka-1", "api": "EndTxn", "forward": True,
         "after_api": "Produce", "after_ms": 150}
    )  # fmt: skip
    end_txn = FrameContext("kafka-1", Direction.REQUEST, 26, 3, 7, 10, 5, b"endtxn")
    table.judge(end_txn, table.for_route("kafka-1"))
    assert len(fault.evidence().late) == 1
    for route in ("kafka4-1", "refbroker"):  # another lane's records
        for direction in Direction:
            table.judge(frame(8, route, direction), table.for_route(route))
    assert fault.evidence().late[0].released_ms is None
    for direction in Direction:  # the next transaction's, to another broker of the cluster
        table.judge(frame(9, "kafka-3", direction), table.for_route("kafka-3"))
    assert fault.evidence().late[0].released_ms is not None


def test_a_late_copy_waiting_for_a_list_is_released_by_the_first_answered(
    table: FaultTable,
) -> None:
    """A transaction begins at its coordinator with AddPartitionsToTxn, or, with transaction
    version 2, with its first Produce: whichever is answered first releases the copy."""
    for first in (ADD_PARTITIONS_TO_TXN, PRODUCE):
        fault = table.add(
            {"kind": "late", "route": "kafka-1", "api": "EndTxn", "forward": True,
             "after_api": ["AddPartitionsToTxn", "Produce"], "after_ms": 150}
        )  # fmt: skip
        end_txn = FrameContext("kafka-1", Direction.REQUEST, 26, 3, 7, 10, 5, b"endtxn")
        table.judge(end_txn, table.for_route("kafka-1"))
        assert fault.spec.took_effect(fault.evidence())[1].endswith(
            "waiting for the next AddPartitionsToTxn or Produce request to be answered"
        )
        for direction in Direction:
            request = FrameContext("kafka-2", direction, first, 3, 8, 11, 6, b"")
            table.judge(request, table.for_route("kafka-2"))
        assert fault.evidence().late[0].released_ms is not None
        table.remove(fault.id)


@pytest.mark.parametrize(
    ("route", "cluster"),
    [
        ("kafka-2", "kafka"),
        ("kafka4-3", "kafka4"),
        ("refbroker", "refbroker"),
        ("broker-12", "broker"),
    ],
)
def test_a_route_leads_to_its_cluster(route: str, cluster: str) -> None:
    assert cluster_of(route) == cluster


def test_an_error_fault_with_a_connection_leaves_the_others_alone(table: FaultTable) -> None:
    fault = table.add(
        {"kind": "error", "api": "Produce", "error": 6, "mode": "rewrite", "connection": 4}
    )

    assert table.judge(produce_response(1, (0,)), table.for_route("kafka-1")) is None  # conn. 3
    assert fault.matched == 0


@pytest.mark.parametrize(
    ("answer", "took_effect"),
    [
        ({"": "NONE"}, True),
        ({"": "PRODUCER_FENCED"}, True),
        ({"": "CONCURRENT_TRANSACTIONS"}, False),
    ],
)
def test_a_late_copy_the_broker_put_off_did_not_take_effect(
    table: FaultTable, answer: dict[str, str], took_effect: bool
) -> None:
    """An EndTxn delivered late and answered: committed, or fenced, it met a transaction; put
    off (the coordinator still completing one), it met none, and the step did not take
    effect (KAFKA-17754's copy landed so in a cell of `make conformance`)."""
    fault = table.add(
        {"kind": "late", "route": "kafka-1", "api": "EndTxn", "forward": True, "after_ms": 500}
    )
    copy = LateCopy(
        api="EndTxn",
        route="kafka-1",
        connection=3,
        correlation_id=90,
        forwarded=True,
        captured_ms=1_000,
        delivered_ms=1_500,
        answered_ms=1_501,
        answer=answer,
    )
    judged, evidence = fault.spec.took_effect(fault.evidence().model_copy(update={"late": [copy]}))
    assert judged is took_effect
    assert evidence.startswith(
        "captured 1 EndTxn request(s) (forwarded too), 1 delivered late and answered: "
        f"delivered 500 ms after capture, answered {answer['']}"
    )
    if not took_effect:
        assert evidence.endswith(
            "put off by the broker, which acted on nothing (it was busy: "
            "the copy landed late into nothing)"
        )

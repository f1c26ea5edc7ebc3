"""Cutting a byte stream into Kafka frames, and reading their header prefix."""

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslab.proxy.framing import (
    FrameSplitter,
    FramingError,
    InFlightRequests,
    ProxyAnswers,
    RequestHeader,
    read_request_header,
    read_response_correlation_id,
)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhi", api_key, version, correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def response_frame(correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def test_many_frames_in_one_read_come_out_in_order() -> None:
    frames = [
        request_frame(0, 9, correlation_id, b"x" * correlation_id) for correlation_id in range(50)
    ]

    run = FrameSplitter().feed(b"".join(frames))

    assert [bytes(frame) for frame in run] == frames
    assert [read_request_header(frame).correlation_id for frame in run] == list(range(50))


def test_a_frame_split_across_reads_is_held_back_until_complete() -> None:
    frame = request_frame(3, 12, 7, b"metadata-body")
    splitter = FrameSplitter()

    assert len(splitter.feed(frame[:2])) == 0  # not even the size prefix
    assert len(splitter.feed(frame[2:9])) == 0  # size and part of the header
    assert splitter.pending_size == 9
    run = splitter.feed(frame[9:] + frame[:5])  # its tail and the start of the next one

    assert [bytes(item) for item in run] == [frame]
    assert splitter.pending_size == 5


def test_run_offsets_cover_the_frames_contiguously() -> None:
    frames = [response_frame(1, b"a"), response_frame(2, b"bb"), response_frame(3)]

    run = FrameSplitter().feed(b"".join(frames) + b"\x00\x00")

    assert run.ends == [9, 19, 27]
    assert run.start(1) == 9
    assert bytes(run.buffer[: run.ends[-1]]) == b"".join(frames)
    assert [read_response_correlation_id(run.buffer, run.start(i)) for i in range(3)] == [1, 2, 3]


@given(
    bodies=st.lists(st.binary(max_size=40), min_size=1, max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=15),
)
def test_any_read_boundaries_give_back_the_same_frames(
    bodies: list[bytes], cuts: list[int]
) -> None:
    frames = [request_frame(0, 9, index, body) for index, body in enumerate(bodies)]
    stream = b"".join(frames)
    boundaries = sorted({cut % (len(stream) + 1) for cut in cuts} | {0, len(stream)})
    splitter = FrameSplitter()

    seen = [
        bytes(frame)
        for start, end in itertools.pairwise(boundaries)
        for frame in splitter.feed(stream[start:end])
    ]

    assert seen == frames
    assert splitter.pending_size == 0


@pytest.mark.parametrize("size", [-1, 1024 + 1])
def test_a_size_outside_the_limits_is_not_kafka(size: int) -> None:
    with pytest.raises(FramingError, match=str(size)):
        FrameSplitter(max_frame_size=1024).feed(struct.pack(">i", size) + b"\x00" * 16)


def test_headers_of_short_frames_are_refused() -> None:
    with pytest.raises(FramingError, match="request frame shorter"):
        read_request_header(struct.pack(">i", 3) + b"abc")
    with pytest.raises(FramingError, match="response frame shorter"):
        read_response_correlation_id(struct.pack(">i", 2) + b"ab")


def test_responses_find_their_request_by_correlation_id() -> None:
    in_flight = InFlightRequests()
    in_flight.sent(RequestHeader(api_key=0, api_version=9, correlation_id=11), at=1.0)
    in_flight.sent(RequestHeader(api_key=3, api_version=12, correlation_id=12), at=2.0)

    metadata = in_flight.answered(12)
    produce = in_flight.answered(11)

    assert (metadata.api_key, metadata.api_version, metadata.sent_at) == (3, 12, 2.0)
    assert (produce.api_key, produce.api_version) == (0, 9)
    assert in_flight.answered(11) is None  # answered once
    assert len(in_flight) == 0


def test_unanswered_requests_do_not_pile_up() -> None:
    in_flight = InFlightRequests(capacity=3)
    for correlation_id in range(5):
        in_flight.sent(RequestHeader(0, 9, correlation_id), at=0.0)

    assert len(in_flight) == 3
    assert in_flight.answered(1) is None  # the oldest were forgotten
    assert in_flight.answered(4) is not None


def test_a_released_partial_frame_continues_as_lead_bytes() -> None:
    big = request_frame(0, 9, 1, b"p" * 100)
    small = request_frame(18, 3, 2)
    splitter = FrameSplitter()

    assert len(splitter.feed(big[:30])) == 0
    assert splitter.release_partial(header_size=8, min_frame_size=1000) is None  # too small
    released = splitter.release_partial(header_size=8, min_frame_size=100)
    run = splitter.feed(big[30:90])
    last = splitter.feed(big[90:] + small)

    assert released == big[:30]
    assert (run.lead, run.ends) == (60, [])
    assert (last.lead, len(last)) == (len(big) - 90, 1)
    assert bytes(last.buffer[: last.lead]) + bytes(last.frame(0)) == big[90:] + small
    assert read_request_header(last.frame(0)).api_key == 18


def test_a_partial_frame_without_its_header_is_not_released() -> None:
    splitter = FrameSplitter()
    splitter.feed(request_frame(0, 9, 1, b"z" * 50)[:10])

    assert splitter.release_partial(header_size=8) is None
    assert splitter.pending_size == 10


def answer_order(
    kinds: list[str], delivered_after: list[int], streaming: bool = False
) -> list[int]:
    """What the client receives, by correlation id, when requests of ``kinds`` pass the proxy
    one by one ("forward": the broker answers, "silent": it never does (acks=0), "reject": the
    proxy answers), the broker answering ``delivered_after[i]`` of the waiting ones after
    request i, and the rest at the end."""
    in_flight, answers = InFlightRequests(), ProxyAnswers()
    broker: list[int] = []  # forwarded requests the broker will answer, in order
    received: list[int] = []

    def respond(count: int) -> None:
        for correlation_id in broker[:count]:
            in_flight.answered(correlation_id)
            before, after = answers.around(correlation_id)
            received.extend(int.from_bytes(frame, "big") for frame in before)
            received.append(correlation_id)
            received.extend(int.from_bytes(frame, "big") for frame in after)
        del broker[:count]

    for correlation_id, (kind, count) in enumerate(zip(kinds, delivered_after, strict=True)):
        in_flight.sent(RequestHeader(0, 9, correlation_id))
        if kind == "reject":
            in_flight.forget(correlation_id)
            now = answers.add(correlation_id.to_bytes(4, "big"), in_flight, streaming)
            if now is not None:
                received.append(correlation_id)
        elif kind == "forward":
            broker.append(correlation_id)
        respond(count)
    respond(len(broker))
    received.extend(int.from_bytes(frame, "big") for frame in answers.settled())
    return received


def test_an_answer_waits_for_the_responses_to_the_requests_before_it() -> None:
    # 0 and 1 in flight when 2 is rejected; 3 goes on: 2's answer goes between 1's and 3's
    assert answer_order(["forward", "forward", "reject", "forward"], [0, 0, 0, 1]) == [0, 1, 2, 3]
    # nothing in flight: at once (0); behind a request in flight, after its response (2)
    assert answer_order(["reject", "forward", "reject"], [0, 0, 0]) == [0, 1, 2]
    # 0 is never answered (acks=0): 1's answer goes before 2's response
    assert answer_order(["silent", "reject", "forward"], [0, 0, 0]) == [1, 2]
    # a response half through when 0 is rejected: after it has ended
    assert answer_order(["reject"], [0], streaming=True) == [0]


@given(
    st.lists(
        st.tuples(st.sampled_from(["forward", "reject", "silent"]), st.integers(0, 3)),
        min_size=1,
        max_size=30,
    )
)
def test_every_answer_comes_in_request_order(requests: list[tuple[str, int]]) -> None:
    kinds = [kind for kind, _ in requests] + ["forward"]
    delivered_after = [count for _, count in requests] + [0]

    received = answer_order(kinds, delivered_after)

    assert received == [i for i, kind in enumerate(kinds) if kind != "silent"]

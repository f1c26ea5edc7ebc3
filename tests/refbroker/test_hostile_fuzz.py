"""Bounded fuzzing: random bytes, random frames and mutated valid requests never stop the broker."""

from __future__ import annotations

import socket
import struct

from crafted import batch_of, fetch_request, produce_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataRequest
from refbroker_process import HOST, RunningBroker

from eoslab.kafka_api import encode_request
from eoslab.probe.batches import record_batch
from eoslab.probe.requests import (
    READ_COMMITTED,
    add_offsets_to_txn_request,
    add_partitions_to_txn_request,
    describe_groups_request,
    describe_transactions_request,
    end_txn_request,
    find_coordinator_request,
    find_transaction_coordinator_request,
    heartbeat_request,
    init_transactional_producer_request,
    list_offsets_request,
    offset_commit_request,
    offset_fetch_request,
    sync_group_request,
    txn_offset_commit_request,
)

TOPIC = "fuzz"


def framed(request: object) -> bytes:
    return encode_request(request, 1, "fuzz")


VALID_FRAMES = [
    framed(ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")),
    framed(MetadataRequest(topics=None, include_topic_authorized_operations=False)),
    framed(produce_request(TOPIC, 0, batch_of(1000, 0, 0, 3, "v"))),
    framed(fetch_request(TOPIC, 0, 0)),
    # group requests answered at once (a JoinGroup would wait at the barrier)
    framed(find_coordinator_request("fuzz")),
    framed(sync_group_request("fuzz", 1, "member", {"member": b"assignment"})),
    framed(heartbeat_request("fuzz", 1, "member")),
    framed(
        offset_commit_request(
            "fuzz", generation=-1, member_id="", topic=TOPIC, partition=0, offset=1
        )
    ),
    framed(offset_fetch_request("fuzz", TOPIC, (0,), require_stable=True)),
    framed(describe_groups_request("fuzz")),
    # transactions: the coordinator's APIs and the partitions' transactional side
    framed(find_transaction_coordinator_request("fuzz")),
    framed(init_transactional_producer_request("fuzz", 60_000)),
    framed(add_partitions_to_txn_request("fuzz", 1000, 0, TOPIC, (0,))),
    framed(add_offsets_to_txn_request("fuzz", 1000, 0, "fuzz")),
    framed(txn_offset_commit_request("fuzz", "fuzz", 1000, 0, topic=TOPIC, partition=0, offset=1)),
    framed(end_txn_request("fuzz", 1000, 0, commit=True)),
    framed(describe_transactions_request("fuzz")),
    framed(
        produce_request(
            TOPIC, 0, record_batch(1000, 0, 0, [b"v"], transactional=True), transactional_id="fuzz"
        )
    ),
    framed(fetch_request(TOPIC, 0, 0, isolation_level=READ_COMMITTED)),
    framed(list_offsets_request(TOPIC, 0, READ_COMMITTED)),
]


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(VALID_FRAMES)))
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, len(frame) - 1))
        frame[position] = draw(st.integers(0, 255))
    return bytes(frame[: draw(st.integers(0, len(frame)))])


random_frames = st.binary(max_size=256).map(lambda body: struct.pack(">i", len(body)) + body)
hostile_bytes = st.one_of(st.binary(max_size=512), random_frames, mutated_frames())


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(payload=hostile_bytes)
def test_broker_survives_hostile_bytes(refbroker: RunningBroker, payload: bytes) -> None:
    if TOPIC not in _topics(refbroker):
        refbroker.create_topic(TOPIC, 1)
    with socket.create_connection((HOST, refbroker.port), timeout=5) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        try:
            while sock.recv(65536):  # answers, if any, then the close
                pass
        except (TimeoutError, ConnectionResetError):
            pass
    with refbroker.client() as client:
        response = client.request(
            ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
        )
    assert response.error_code is ErrorCode.none
    assert refbroker.process is not None
    assert refbroker.process.poll() is None


def _topics(broker: RunningBroker) -> set[str]:
    with broker.client() as client:
        response = client.request(
            MetadataRequest(topics=None, include_topic_authorized_operations=False)
        )
    return {t.name for t in response.topics}

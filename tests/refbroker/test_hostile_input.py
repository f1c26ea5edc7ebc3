"""Hostile input: the offending connection gets the protocol's error or is closed; the broker
and its other clients carry on."""

from __future__ import annotations

import datetime
import random
import socket
import struct
import time
import uuid

import pytest
from crafted import batch_of, errors_of, init_producer_id, produce_request
from kio.index import KioIndexError, load_request_schema
from kio.schema.api_versions.v0 import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.api_versions.v4 import ApiVersionsRequest as ApiVersionsRequestV4
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v13.request import FetchRequest as FetchRequestV13
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.response_header.v0 import ResponseHeader as ResponseHeaderV0
from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest
from kio.serial import entity_reader
from refbroker_process import HOST, RunningBroker, StartBroker

from eoslab.kafka_api import api_name
from eoslab.probe.batches import record_batch
from eoslab.probe.requests import (
    add_partitions_to_txn_request,
    end_txn_request,
    init_transactional_producer_request,
)
from eoslab.refbroker.apis import api_handlers
from eoslab.refbroker.protocol import build, nested
from eoslab.soak.mutator import build_entity

NO_WAIT = datetime.timedelta(0)
API_VERSIONS = ApiVersionsRequest(client_software_name="eoslab-tests", client_software_version="1")


def metadata_request(topic: str) -> MetadataRequest:
    return MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        include_topic_authorized_operations=False,
    )


def still_serving(broker: RunningBroker) -> bool:
    """A fresh client is answered and the process is alive."""
    with broker.client() as other:
        answered = other.request(API_VERSIONS).error_code is ErrorCode.none
    return answered and broker.process is not None and broker.process.poll() is None


def raw_connection(broker: RunningBroker) -> socket.socket:
    return socket.create_connection((HOST, broker.port), timeout=10)


def closed_by_broker(sock: socket.socket) -> bool:
    """Drain until the broker closes (True) or the 10 s socket timeout passes (False)."""
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


@pytest.mark.parametrize(
    ("label", "data"),
    [
        ("negative size", struct.pack(">i", -1)),
        ("size below a header", struct.pack(">i", 4) + b"\x00\x12\x00\x03"),
        ("unknown API key", struct.pack(">i", 12) + struct.pack(">hhi", 999, 0, 7) + b"\x00\x00"),
        (
            "garbage Produce body",
            struct.pack(">i", 24) + struct.pack(">hhi", 0, 9, 1) + b"\xfe" * 16,
        ),
        ("truncated frame", struct.pack(">i", 100) + struct.pack(">hhi", 18, 3, 1)),
    ],
)
def test_malformed_frames_close_only_their_connection(
    refbroker: RunningBroker, label: str, data: bytes
) -> None:
    with raw_connection(refbroker) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        assert closed_by_broker(sock), label
    assert still_serving(refbroker)
    assert refbroker.counters()["connections_closed_on_bad_input"] == 1


def test_oversized_frame_is_refused_before_its_body_arrives(start_refbroker: StartBroker) -> None:
    broker = start_refbroker("--max-frame-bytes", "1024")
    with raw_connection(broker) as sock:
        sock.sendall(struct.pack(">i", 1025))  # the body is never sent: no need to wait for it
        assert closed_by_broker(sock)
    assert still_serving(broker)


def test_a_half_sent_frame_does_not_block_other_clients(refbroker: RunningBroker) -> None:
    with raw_connection(refbroker) as stalled:
        stalled.sendall(struct.pack(">i", 1000) + b"\x00\x03")
        assert still_serving(refbroker)


def test_unserved_api_known_to_kafka_closes_the_connection(refbroker: RunningBroker) -> None:
    with refbroker.client() as client:
        client.send(WriteTxnMarkersRequest(markers=()))  # broker to broker: not served
        assert client.closed_by_peer()
    assert still_serving(refbroker)


def test_unsupported_api_versions_version_gets_v0_fallback_with_our_ranges(
    refbroker: RunningBroker,
) -> None:
    with refbroker.client() as client:
        client.send(ApiVersionsRequestV4(client_software_name="x", client_software_version="1"))
        frame = client.receive_frame()  # decoded by hand: the answer is v0, not v4
    header, size = entity_reader(ResponseHeaderV0)(frame, 0)
    response, _ = entity_reader(ApiVersionsResponseV0)(frame, size)
    assert header.correlation_id == 0
    assert response.error_code is ErrorCode.unsupported_version
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[18] == (0, 3)
    assert ranges[0] == (3, 11)


def test_unsupported_version_of_a_served_api_gets_unsupported_version(
    refbroker: RunningBroker,
) -> None:
    with refbroker.client() as client:
        response = client.request(
            FetchRequestV13(max_wait=NO_WAIT, min_bytes=1, topics=(), forgotten_topics_data=())
        )
    assert response.error_code is ErrorCode.unsupported_version


def test_bad_crc_is_corrupt_message_for_that_partition(refbroker: RunningBroker) -> None:
    refbroker.create_topic("crc", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        batch = bytearray(batch_of(pid, epoch, 0, 2, "v"))
        batch[-1] ^= 0xFF  # inside the CRC-covered part
        corrupt = client.request(produce_request("crc", 0, bytes(batch)))
        intact = client.request(produce_request("crc", 0, batch_of(pid, epoch, 0, 2, "v")))
    assert errors_of([corrupt, intact]) == ["CORRUPT_MESSAGE", "NONE"]


def test_transaction_requests_that_make_no_sense_get_precise_errors(
    refbroker: RunningBroker,
) -> None:
    """Nonsense for the transaction coordinator and the transactional side of a partition is
    answered with Kafka's error, and the broker carries on."""
    refbroker.create_topic("txn", 1)
    transactional = record_batch(4242, 0, 0, [b"v"], transactional=True)
    with refbroker.client() as client:
        timeout = client.request(init_transactional_producer_request("t", -5))
        partition = client.request(add_partitions_to_txn_request("t", 4242, 0, "txn", (-1,)))
        unknown = client.request(end_txn_request("never-initialised", 4242, 0, commit=True))
        unverified = client.request(produce_request("txn", 0, transactional, transactional_id="x"))
    assert timeout.error_code is ErrorCode.invalid_transaction_timeout
    (result,) = partition.results_by_topic_v3_and_below[0].results_by_partition
    assert result.partition_error_code is ErrorCode.unknown_topic_or_partition
    assert unknown.error_code is ErrorCode.invalid_producer_id_mapping
    assert errors_of([unverified]) == ["INVALID_PRODUCER_ID_MAPPING"]
    assert still_serving(refbroker)


def _next_versions() -> list[tuple[int, int]]:
    """(API key, the version above the highest we serve) wherever Kafka defines that version."""
    found = []
    for key, handler in sorted(api_handlers().items()):
        try:
            load_request_schema(key, handler.max_version + 1)
        except KioIndexError:
            continue
        found.append((key, handler.max_version + 1))
    return found


@pytest.mark.parametrize(("api_key", "version"), _next_versions())
def test_every_api_refuses_a_version_above_ours_with_an_answer(
    refbroker: RunningBroker, api_key: int, version: int
) -> None:
    """Found by `make soak`: Metadata v13 closed the connection on an internal error (its
    refusal lacked v13's top-level error code) instead of answering UNSUPPORTED_VERSION."""
    request = build_entity(load_request_schema(api_key, version), random.Random(api_key))
    with refbroker.client() as client:
        client.send(request)
        assert client.answer_ready(10), f"{api_name(api_key)} v{version} got no answer"
        frame = client.receive_frame()
    assert struct.unpack_from(">i", frame)[0] == 0  # the correlation id
    assert still_serving(refbroker)
    assert "internal error" not in refbroker.log_file.read_text()


def test_offset_commit_v10_is_refused_topic_by_topic_with_their_ids(
    refbroker: RunningBroker,
) -> None:
    """Found by the full-size `make soak`: OffsetCommit v10 (KIP-848, topics named by id; we
    serve v2-v9) closed the connection on an internal error, its refusal reading topic names
    v10 does not have. Kafka answers UNSUPPORTED_VERSION on every partition, by topic id."""
    schema = load_request_schema(8, 10)
    topic_type = nested(schema, "OffsetCommitRequestTopic")
    partition_type = nested(schema, "OffsetCommitRequestPartition")
    ids = (uuid.UUID(int=11), uuid.UUID(int=12))
    request = build(
        schema,
        group_id="g",
        generation_id_or_member_epoch=1,
        member_id="m",
        group_instance_id=None,
        topics=tuple(
            topic_type(
                topic_id=topic_id,
                partitions=tuple(
                    partition_type(
                        partition_index=index, committed_offset=5, committed_metadata=None
                    )
                    for index in (0, 1)
                ),
            )
            for topic_id in ids
        ),
    )
    with refbroker.client() as client:
        response = client.request(request)
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in response.topics
    ] == [
        (i, [(0, ErrorCode.unsupported_version), (1, ErrorCode.unsupported_version)]) for i in ids
    ]
    assert still_serving(refbroker)
    assert "internal error" not in refbroker.log_file.read_text()


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_refuses_null_names_and_topic_ids_as_kafka_does(
    refbroker: RunningBroker, version: int
) -> None:
    """Found by `make soak`: a null topic name on v10/v11 (whose response cannot carry one)
    closed the connection on an internal error. Kafka answers INVALID_REQUEST for every topic,
    a null name as ""."""
    refbroker.create_topic("named", 1)
    schema = load_request_schema(3, version)
    topic_type = nested(schema, "MetadataRequestTopic")
    some_id = uuid.UUID(int=7)
    requests = [
        (topic_type(topic_id=None, name=None), topic_type(topic_id=None, name="named")),
        (topic_type(topic_id=some_id, name="named"),),
    ]
    for topics in requests:
        with refbroker.client() as client:
            response = client.request(
                build(
                    schema,
                    topics=topics,
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                )
            )
        assert [(t.name, t.error_code) for t in response.topics] == [
            (t.name or "", ErrorCode.invalid_request) for t in topics
        ]
    assert "internal error" not in refbroker.log_file.read_text()


def test_a_count_beyond_the_frame_closes_the_connection_and_the_broker_lives(
    refbroker: RunningBroker,
) -> None:
    """Found by `make soak`: this Metadata v11 request's topics count (9,788,855,015 in a
    5-byte varint) made kio's native reader allocate 78 GB, and the process aborted."""
    body = bytes.fromhex(
        "0003000b000074bfffff00e8a5d8bb24ebd5a5b44691cacdf456850706721c6e6765f5756e20adbd84ea"
        "6ab48d7937c83535fc0c736f036b2d6d656d62657200010100"
    )
    with raw_connection(refbroker) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert closed_by_broker(sock)
    assert still_serving(refbroker)
    assert "collection of size 9788855015" in refbroker.log_file.read_text()


def test_a_topic_of_a_thousand_partitions_does_not_stall_other_clients(
    refbroker: RunningBroker,
) -> None:
    """Found by the full-size `make soak`: a mutated CreateTopics asking for 6,145 partitions
    held the broker's loop for ~14 s (a few fsyncs per partition), so every other client hung
    (15 frames unanswered, a 10 s liveness stall). Partitions are now created one at a time
    with the loop serving others in between, and the topic appears whole at the end."""
    partitions = 1000
    topic = CreatableTopic(
        name="wide", num_partitions=partitions, replication_factor=1, assignments=(), configs=()
    )
    create = CreateTopicsRequest(topics=(topic,), timeout=datetime.timedelta(seconds=60))
    with refbroker.client() as creator:
        creator.send(create)
        with refbroker.client() as other:  # answered while the creation is under way
            assert other.request(API_VERSIONS).error_code is ErrorCode.none
            seen = other.request(metadata_request("wide"))
        assert not creator.answer_ready(0), "the creation ended before the other client's turn"
        assert creator.answer_ready(120)
        created = creator.receive()
    assert seen.topics[0].error_code is ErrorCode.unknown_topic_or_partition  # not half-made
    assert (created.topics[0].error_code, created.topics[0].num_partitions) == (
        ErrorCode.none,
        partitions,
    )
    with refbroker.client() as client:
        assert len(client.request(metadata_request("wide")).topics[0].partitions) == partitions
    assert "internal error" not in refbroker.log_file.read_text()


def test_a_creation_longer_than_the_request_timeout_is_answered_timed_out_and_goes_on(
    refbroker: RunningBroker,
) -> None:
    """Found by the full-size `make soak` (busy machine): a mutated CreateTopics of 6,145
    partitions with a 100 ms timeout went unanswered for longer than the soak waits (5 s).
    Kafka 3.9 answers REQUEST_TIMED_OUT when its timeout ends and the creation goes on."""
    partitions = 1000
    topic = CreatableTopic(
        name="slow", num_partitions=partitions, replication_factor=1, assignments=(), configs=()
    )
    create = CreateTopicsRequest(topics=(topic,), timeout=datetime.timedelta(milliseconds=100))
    with refbroker.client() as client:
        answer = client.request(create)
        assert answer.topics[0].error_code is ErrorCode.request_timed_out
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            (found,) = client.request(metadata_request("slow")).topics
            if found.error_code is ErrorCode.none:
                break
            time.sleep(0.2)
        again = client.request(create)
    assert len(found.partitions) == partitions  # it appeared whole
    assert again.topics[0].error_code is ErrorCode.topic_already_exists
    assert "internal error" not in refbroker.log_file.read_text()

"""The error responses the proxy encodes (reject), rewrites (rewrite) and reads (a late copy's
answer): for every API it knows, at every version kio knows, from requests kio encodes."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial._introspect import EntityTupleField, classify_field

from eoslab.kafka_api import api_name, encode_request, parse_api_key
from eoslab.proxy.faults.results import (
    Level,
    answer_errors,
    blank_values,
    encodable_apis,
    encodable_versions,
    error_response,
    field_of,
    partitioned,
    rewritten_response,
    schema,
)

CORRELATION_ID = 77
PARTITIONS = (0, 1)
CLIENT_APIS = (
    "Produce",
    "Fetch",
    "ListOffsets",
    "Metadata",
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "ApiVersions",
    "InitProducerId",
    "OffsetForLeaderEpoch",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "TxnOffsetCommit",
    "ConsumerGroupHeartbeat",
)
"""The APIs the lab's clients send (librdkafka, Kafka's Java client, franz-go)."""


def sample(entity_type: Any, levels: tuple[Level, ...]) -> Any:
    """A request of ``entity_type`` with two entries at each level of its results (a topic
    named "orders", partitions 0 and 1, keys "k0" and "k1")."""
    values = blank_values(entity_type, ErrorCode.none)
    for field in dataclasses.fields(entity_type):
        kafka_type = field.metadata.get("kafka_type")
        if kafka_type == "uuid":
            values[field.name] = uuid.UUID(int=7)
        elif kafka_type == "string" and values.get(field.name, "") is None:
            values[field.name] = "orders"
        if field.name in {"name", "topic"}:
            values[field.name] = "orders"
    if levels:
        level = levels[0]
        array = field_of(entity_type, level.request)
        assert array is not None
        kind = classify_field(array)
        if isinstance(kind, EntityTupleField):
            values[level.request] = tuple(
                _numbered(sample(kind.type_, levels[1:]), level, index) for index in PARTITIONS
            )
        elif "int" in array.metadata["kafka_type"]:
            values[level.request] = PARTITIONS
        else:
            values[level.request] = tuple(f"k{index}" for index in PARTITIONS)
    return entity_type(**values)


def _numbered(entry: Any, level: Level, index: int) -> Any:
    numbered = {
        asked: index
        for asked, _ in level.keys
        if asked in {"index", "partition", "partition_index"} and field_of(type(entry), asked)
    }
    return dataclasses.replace(entry, **numbered)


def every_version() -> list[Any]:
    return [
        pytest.param(api_key, version, id=f"{api_name(api_key)}-v{version}")
        for api_key in encodable_apis()
        for version in sorted(schema_name_map[api_key_map[api_key]])
    ]


def request_frame(api_key: int, version: int) -> bytes:
    found = schema(api_key, version)
    assert found is not None
    return encode_request(sample(found.request, found.results.levels), CORRELATION_ID, "test")


def test_every_version_kio_knows_of_every_api_is_encodable() -> None:
    for api_key in encodable_apis():
        assert encodable_versions(api_key) == tuple(sorted(schema_name_map[api_key_map[api_key]]))
    assert {parse_api_key(name) for name in CLIENT_APIS} <= set(encodable_apis())


@pytest.mark.parametrize(("api_key", "version"), every_version())
def test_reject_answers_every_result_with_the_error_and_rewrite_replaces_it(
    api_key: int, version: int
) -> None:
    answer = error_response(request_frame(api_key, version), ErrorCode.request_timed_out)

    assert answer is not None
    errors = answer_errors(answer.frame, api_key, version)
    assert errors, f"{api_name(api_key)} v{version}: no result"
    assert set(errors.values()) == {"REQUEST_TIMED_OUT"}
    assert int.from_bytes(answer.frame[4:8], "big") == CORRELATION_ID
    assert int.from_bytes(answer.frame[:4], "big") == len(answer.frame) - 4

    one = 1 if partitioned(api_key) else None
    rewritten = rewritten_response(
        answer.frame, api_key, version, ErrorCode.not_enough_replicas, one
    )
    assert rewritten is not None
    after = answer_errors(rewritten.frame, api_key, version)
    changed = {label for label in after if after[label] != errors[label]}
    assert changed == {r.label for r in rewritten.results}
    assert {r.before for r in rewritten.results} == {"REQUEST_TIMED_OUT"}
    if one is None:
        assert set(after.values()) == {"NOT_ENOUGH_REPLICAS"}
    else:
        assert changed
        assert all(label.endswith(":1") for label in changed)
        assert all(after[label] == "REQUEST_TIMED_OUT" for label in after if label.endswith(":0"))


def produce_frame(partitions: tuple[int, ...], acks: int = -1) -> bytes:
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            TopicProduceData(
                name="orders",
                partition_data=tuple(
                    PartitionProduceData(index=p, records=b"\x00" * 8) for p in partitions
                ),
            ),
        ),
    )
    return encode_request(request, 5, "test")


def test_a_produce_reject_names_each_partition_and_needs_the_selected_one() -> None:
    both = error_response(produce_frame((0, 1)), ErrorCode.not_leader_or_follower, partition=1)

    assert both is not None
    assert [r.label for r in both.results] == ["orders:0", "orders:1"]
    assert error_response(produce_frame((0,)), ErrorCode.not_leader_or_follower, 1) is None
    assert error_response(produce_frame((0, 1), acks=0), ErrorCode.not_leader_or_follower) is None


def test_a_rewrite_keeps_what_the_broker_said_beside_the_error() -> None:
    broker = error_response(produce_frame((0, 1)), ErrorCode.none)
    assert broker is not None

    rewritten = rewritten_response(broker.frame, 0, 9, ErrorCode.out_of_order_sequence_number, 0)

    assert rewritten is not None
    assert [(r.label, r.before) for r in rewritten.results] == [("orders:0", "NONE")]
    assert answer_errors(rewritten.frame, 0, 9) == {
        "orders:0": "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "orders:1": "NONE",
    }
    assert rewritten_response(broker.frame, 0, 9, ErrorCode.out_of_order_sequence_number, 7) is None


def test_a_metadata_request_for_every_topic_has_no_place_for_an_error_before_v13() -> None:
    every_topic = MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )

    assert error_response(encode_request(every_topic, 3, "t"), ErrorCode.request_timed_out) is None

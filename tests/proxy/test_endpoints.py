"""The fronting proxy's endpoint rewriting, as pure logic: responses kio encodes for every
version of Metadata, FindCoordinator and DescribeCluster the proxy can encode, rewritten and
decoded again."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial._introspect import EntityTupleField, classify_field

from eoslab.proxy.endpoints import (
    DESCRIBE_CLUSTER,
    DESCRIBE_QUORUM,
    ENDPOINT_APIS,
    FIND_COORDINATOR,
    METADATA,
    ControllerEndpointsError,
    Endpoint,
    endpoint_answer,
)
from eoslab.proxy.faults.results import (
    UnencodableError,
    blank_values,
    decode_response,
    encodable_versions,
    frame_of,
    schema,
)
from eoslab.proxy.framing import FrameSplitter
from eoslab.proxy.fronting import Fronting
from eoslab.settings import HostPort

BROKERS = {1: HostPort("kafka-a.example", 9092), 2: HostPort("10.0.0.2", 19092)}
ROUTES = {1: HostPort("127.0.0.1", 40001), 2: HostPort("127.0.0.1", 40002)}
VERSIONS = [(api, v) for api in sorted(ENDPOINT_APIS) for v in encodable_versions(api)]


def _with_endpoint(entity_type: Any, node_id: int, address: HostPort, **more: Any) -> Any:
    values = blank_values(entity_type, ErrorCode.none) | more
    node_field = "broker_id" if "broker_id" in values else "node_id"
    return entity_type(**values | {node_field: node_id, "host": address.host, "port": address.port})


def response(api_key: int, version: int, **more: Any) -> tuple[Any, bytes]:
    """A response of this version naming brokers 1 and 2 (FindCoordinator up to v3: broker 2),
    and its frame."""
    found = schema(api_key, version)
    assert found is not None
    response_type = found.response
    values = blank_values(response_type, ErrorCode.none) | more
    arrays = [
        (field.name, classify_field(field).type_)
        for field in dataclasses.fields(response_type)
        if isinstance(classify_field(field), EntityTupleField)
        and {"host", "port"} <= {f.name for f in dataclasses.fields(classify_field(field).type_)}
    ]
    if arrays:
        ((name, entry_type),) = arrays
        extra = {"key": "group-a"} if api_key == FIND_COORDINATOR else {}
        values[name] = tuple(
            _with_endpoint(entry_type, node, address, **extra) for node, address in BROKERS.items()
        )
        body = response_type(**values)
    else:
        body = _with_endpoint(response_type, 2, BROKERS[2], **more)
    header = response_type.__header_schema__(correlation_id=5)
    return body, frame_of(header, body)


@pytest.mark.parametrize(("api_key", "version"), VERSIONS)
def test_every_endpoint_is_rewritten_and_nothing_else(api_key: int, version: int) -> None:
    body, frame = response(api_key, version)
    answer = endpoint_answer(frame, api_key, version)
    expected = dict(BROKERS)
    if api_key == FIND_COORDINATOR and version < 4:
        expected = {2: BROKERS[2]}
    assert {(e.node_id, e.address) for e in answer.endpoints} == set(expected.items())

    rewritten = answer.rewritten(ROUTES)
    found = schema(api_key, version)
    assert found is not None
    header, decoded = decode_response(rewritten, found)
    assert header.correlation_id == 5
    again = endpoint_answer(rewritten, api_key, version)
    assert {(e.node_id, e.address) for e in again.endpoints} == {
        (node, ROUTES[node]) for node in expected
    }
    # Only the hosts and ports changed: put the brokers' back and it is the broker's answer.
    assert again.rewritten(BROKERS) == frame
    assert decoded != body


@pytest.mark.parametrize("version", encodable_versions(FIND_COORDINATOR))
def test_a_coordinator_not_found_is_no_endpoint(version: int) -> None:
    """node_id -1, empty host: passed on as the broker gave it (no route for it)."""
    found = schema(FIND_COORDINATOR, version)
    assert found is not None
    body, frame = response(FIND_COORDINATOR, version)
    if version < 4:
        body = dataclasses.replace(body, node_id=-1, host="", port=-1)
    else:
        body = dataclasses.replace(
            body,
            coordinators=tuple(
                dataclasses.replace(c, node_id=-1, host="", port=-1) for c in body.coordinators
            ),
        )
    header = found.response.__header_schema__(correlation_id=5)
    frame = frame_of(header, body)
    answer = endpoint_answer(frame, FIND_COORDINATOR, version)
    assert answer.endpoints == ()
    assert answer.rewritten({}) == frame


def test_describe_cluster_controllers_are_left_alone() -> None:
    version = max(encodable_versions(DESCRIBE_CLUSTER))
    _, frame = response(DESCRIBE_CLUSTER, version, endpoint_type=2)
    with pytest.raises(ControllerEndpointsError):
        endpoint_answer(frame, DESCRIBE_CLUSTER, version)


def test_describe_quorum_names_controllers_and_is_left_alone() -> None:
    """Any DescribeQuorum answer: its nodes' listeners are controllers' (no route to them)."""
    assert Fronting.rewrites(DESCRIBE_QUORUM)
    with pytest.raises(ControllerEndpointsError, match="DescribeQuorum v2"):
        endpoint_answer(b"", DESCRIBE_QUORUM, 2)


def test_an_unknown_version_is_unencodable() -> None:
    _, frame = response(METADATA, 12)
    with pytest.raises(UnencodableError, match="Metadata v99"):
        endpoint_answer(frame, METADATA, 99)


def test_fronting_opens_a_route_per_broker_before_answering_and_counts() -> None:
    opened: list[tuple[str, HostPort]] = []

    async def open_route(name: str, upstream: HostPort) -> HostPort:
        opened.append((name, upstream))
        return ROUTES[int(name.removeprefix("broker-"))]

    async def scenario() -> tuple[bytes | None, bytes | None]:
        fronting = Fronting(open_route)
        _, frame = response(METADATA, 12)
        rewritten = await fronting.rewritten(frame, METADATA, 12)
        untouched = await fronting.rewritten(frame, METADATA, 99)
        snapshot = fronting.snapshot()
        assert snapshot["rewritten"] == {"Metadata": 1}
        assert snapshot["unencodable"] == {"Metadata v99": 1}
        assert snapshot["handed_out"] == {
            "broker-1": "127.0.0.1:40001",
            "broker-2": "127.0.0.1:40002",
        }
        assert snapshot["upstreams"] == {
            "broker-1": "kafka-a.example:9092",
            "broker-2": "10.0.0.2:19092",
        }
        return rewritten, untouched

    rewritten, untouched = asyncio.run(scenario())
    assert untouched is None
    assert opened == [("broker-1", BROKERS[1]), ("broker-2", BROKERS[2])]
    assert rewritten is not None
    assert list(endpoint_answer(rewritten, METADATA, 12).endpoints) == [
        Endpoint(1, ROUTES[1]),
        Endpoint(2, ROUTES[2]),
    ]


def test_a_frame_to_be_rewritten_is_never_released_in_parts() -> None:
    splitter = FrameSplitter()
    body = b"\x00\x00\x00\x05" + b"x" * 100  # correlation id 5
    frame = len(body).to_bytes(4, "big") + body
    splitter.feed(frame[:50])
    assert (
        splitter.release_partial(4, 0, whole=lambda start: start[4:8] == b"\x00\x00\x00\x05")
        is None
    )
    run = splitter.feed(frame[50:])
    assert [bytes(f) for f in run] == [frame]
    splitter.feed(frame[:50])
    assert splitter.release_partial(4, 0, whole=lambda start: False) == frame[:50]

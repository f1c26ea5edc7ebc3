"""The fronting proxy on real sockets, in process: a stand-in broker answers every request with
a Metadata response too large to pass in one read (more than the size the proxy streams
through in parts), sent in pieces; the client gets it whole, its brokers at the proxy's own
routes, opened before the answer arrived."""

from __future__ import annotations

import asyncio
import dataclasses

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from eoslab.control.fault_log import FaultLog
from eoslab.kafka_api import SIZE_PREFIX, decode_response, encode_request
from eoslab.proxy.connection import STREAMED_FRAME_SIZE
from eoslab.proxy.faults.results import blank_values, frame_of
from eoslab.proxy.framing import read_request_header
from eoslab.proxy.server import ChaosProxy, Route
from eoslab.settings import HOST, HostPort

TOPICS = 20000
PIECE = 64 * 1024


def metadata(correlation_id: int, broker: HostPort) -> bytes:
    topic = MetadataResponseTopic(
        **blank_values(MetadataResponseTopic, ErrorCode.none) | {"partitions": ()}
    )
    body = MetadataResponse(
        **blank_values(MetadataResponse, ErrorCode.none)
        | {
            "brokers": tuple(
                MetadataResponseBroker(
                    node_id=BrokerId(node), host=broker.host, port=i32(broker.port), rack=None
                )
                for node in (1, 2)
            ),
            "topics": tuple(
                dataclasses.replace(topic, name=TopicName(f"topic-{n:05}")) for n in range(TOPICS)
            ),
        }
    )
    return frame_of(MetadataResponse.__header_schema__(correlation_id=i32(correlation_id)), body)


async def ask(address: HostPort, correlation_id: int) -> MetadataResponse:
    reader, writer = await asyncio.open_connection(address.host, address.port)
    request = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    writer.write(encode_request(request, correlation_id, "test"))
    (size,) = SIZE_PREFIX.unpack(await reader.readexactly(SIZE_PREFIX.size))
    answer = decode_response(await reader.readexactly(size), MetadataResponse)
    writer.close()
    return answer


async def front_a_broker() -> tuple[list[MetadataResponse], dict[str, object], int]:
    accepted = 0

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        own = HostPort(*writer.get_extra_info("sockname")[:2])
        while prefix := await reader.read(SIZE_PREFIX.size):
            (size,) = SIZE_PREFIX.unpack(prefix)
            header = read_request_header(prefix + await reader.readexactly(size))
            answer = metadata(header.correlation_id, own)
            assert len(answer) > 2 * STREAMED_FRAME_SIZE
            for start in range(0, len(answer), PIECE):
                writer.write(answer[start : start + PIECE])
                await writer.drain()
                await asyncio.sleep(0.001)
        writer.close()

    server = await asyncio.start_server(broker, HOST, 0)
    upstream = HostPort(*server.sockets[0].getsockname()[:2])
    proxy = ChaosProxy(
        [Route("bootstrap-1", HostPort(HOST, 0), upstream)], 0, FaultLog(None), front=True
    )
    await proxy.start()
    try:
        first = await ask(proxy.listen_address("bootstrap-1"), 1)
        brokers = {
            int(broker.node_id): HostPort(broker.host, broker.port) for broker in first.brokers
        }
        second = await ask(brokers[2], 2)  # the route is up: the answer came after it
        assert proxy.fronting is not None
        return [first, second], proxy.fronting.snapshot(), accepted
    finally:
        await proxy.stop()
        server.close()
        await server.wait_closed()


def test_a_large_answer_is_rewritten_whole_and_its_routes_are_open() -> None:
    (first, second), tally, accepted = asyncio.run(front_a_broker())
    assert len(first.topics) == TOPICS
    routes = tally["handed_out"]
    assert isinstance(routes, dict)
    assert set(routes) == {"broker-1", "broker-2"}
    for answer in (first, second):
        assert {str(HostPort(b.host, b.port)) for b in answer.brokers} == set(routes.values())
    assert tally["rewritten"] == {"Metadata": 2}
    assert accepted == 2  # the bootstrap's connection and broker-2's

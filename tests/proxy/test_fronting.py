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


def metadata(correlation_id: int, broker: HostPort, topics: int) -> bytes:
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
                dataclasses.replace(topic, name=TopicName(f"topic-{n:05}")) for n in range(topics)
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


class StandInBroker:
    """Answers every request with a Metadata response naming nodes 1 and 2 at ``advertised``
    (its own address until told otherwise), sent in pieces; counts its connections."""

    def __init__(self, topics: int) -> None:
        self.topics = topics
        self.accepted = 0
        self.advertised: HostPort | None = None
        self._server: asyncio.Server | None = None

    async def start(self) -> HostPort:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        return HostPort(*self._server.sockets[0].getsockname()[:2])

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        own = HostPort(*writer.get_extra_info("sockname")[:2])
        while prefix := await reader.read(SIZE_PREFIX.size):
            (size,) = SIZE_PREFIX.unpack(prefix)
            header = read_request_header(prefix + await reader.readexactly(size))
            answer = metadata(header.correlation_id, self.advertised or own, self.topics)
            for start in range(0, len(answer), PIECE):
                writer.write(answer[start : start + PIECE])
                await writer.drain()
                await asyncio.sleep(0.001)
        writer.close()


async def fronted(*brokers: StandInBroker) -> tuple[ChaosProxy, list[HostPort]]:
    """A fronting proxy whose bootstrap is the first stand-in; every stand-in's address."""
    addresses = [await broker.start() for broker in brokers]
    proxy = ChaosProxy(
        [Route("bootstrap-1", HostPort(HOST, 0), addresses[0])], 0, FaultLog(None), front=True
    )
    await proxy.start()
    return proxy, addresses


def routes(answer: MetadataResponse) -> dict[int, HostPort]:
    return {int(broker.node_id): HostPort(broker.host, broker.port) for broker in answer.brokers}


async def front_a_large_answer() -> tuple[list[MetadataResponse], dict[str, object], int]:
    broker = StandInBroker(TOPICS)
    proxy, _ = await fronted(broker)
    try:
        first = await ask(proxy.listen_address("bootstrap-1"), 1)
        second = await ask(routes(first)[2], 2)  # the route is up: the answer came after it
        assert proxy.fronting is not None
        return [first, second], proxy.fronting.snapshot(), broker.accepted
    finally:
        await proxy.stop()
        await broker.stop()


def test_a_large_answer_is_rewritten_whole_and_its_routes_are_open() -> None:
    (first, second), tally, accepted = asyncio.run(front_a_large_answer())
    assert len(metadata(0, HostPort(HOST, 1), TOPICS)) > 2 * STREAMED_FRAME_SIZE
    assert len(first.topics) == TOPICS
    handed_out = tally["handed_out"]
    assert isinstance(handed_out, dict)
    assert set(handed_out) == {"broker-1", "broker-2"}
    for answer in (first, second):
        assert {str(address) for address in routes(answer).values()} == set(handed_out.values())
    assert tally["rewritten"] == {"Metadata": 2}
    assert accepted == 2  # the bootstrap's connection and broker-2's


async def follow_a_move() -> tuple[list[HostPort], list[int], dict[str, object]]:
    old, new = StandInBroker(1), StandInBroker(1)
    proxy, (_, new_address) = await fronted(old, new)
    try:
        before = routes(await ask(proxy.listen_address("bootstrap-1"), 1))[1]
        await ask(before, 2)
        old.advertised = new_address  # node 1 now advertises another address
        after = routes(await ask(proxy.listen_address("bootstrap-1"), 3))[1]
        await ask(after, 4)
        assert proxy.fronting is not None
        return [before, after, new_address], [old.accepted, new.accepted], proxy.fronting.snapshot()
    finally:
        await proxy.stop()
        await old.stop()
        await new.stop()


def test_a_broker_that_moves_keeps_its_route_which_follows_it() -> None:
    """Node 1's route stays where clients know it; new connections go where it moved."""
    (before, after, moved_to), accepted, tally = asyncio.run(follow_a_move())
    assert before == after
    assert accepted == [3, 1]  # the bootstrap's two and the route's first connection; its last
    upstreams = tally["upstreams"]
    assert isinstance(upstreams, dict)
    assert upstreams["broker-1"] == str(moved_to)

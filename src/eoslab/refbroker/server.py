"""The Kafka protocol server: size-prefixed frames in, one response per request out.

Like Kafka, each connection is served strictly in order (a request is answered before
the next one is read), so pipelined Produce requests of one producer are applied in
the order they were sent. Malformed input closes only the connection it came on.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from eoslab.kafka_api import api_name, error_name
from eoslab.refbroker.apis import ApiVersionsHandler, RequestContext, api_handlers
from eoslab.refbroker.broker import ReferenceBroker
from eoslab.refbroker.faults import DropResponse, FailRequest, LoseRequest, RequestFault
from eoslab.refbroker.length_guard import LyingLengthError, check_lengths
from eoslab.refbroker.protocol import decode, encode, null_field

log = logging.getLogger(__name__)

SIZE_PREFIX = struct.Struct(">i")
HEADER_PREFIX = struct.Struct(">hhi")
"""api_key, api_version, correlation_id: the fields every request header version starts with."""


class BadInputError(Exception):
    """The client sent something we cannot answer; Kafka closes the connection then."""


@dataclass(frozen=True)
class Reply:
    """What to do after a request: send `data` (if any), then maybe close the connection."""

    data: bytes | None
    close: bool = False


class KafkaProtocolServer:
    def __init__(self, broker: ReferenceBroker) -> None:
        self.broker = broker
        self.handlers = api_handlers()
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def start(self) -> None:
        listen = self.broker.config.listen
        self._server = await asyncio.start_server(self._serve, listen.host, listen.port)
        log.info("Kafka protocol listening on %s:%d", listen.host, self.port)

    @property
    def port(self) -> int:
        """The bound port (useful when listening on port 0)."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def disconnect_all(self) -> int:
        """Drop every client connection at once, as a crashing broker process would."""
        dropped = len(self._connections)
        for task, writer in list(self._connections.items()):
            writer.transport.abort()
            task.cancel()
        return dropped

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.disconnect_all()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        peer = writer.get_extra_info("peername")
        frame: bytes | None = None
        try:
            while (frame := await self._read_frame(reader)) is not None:
                reply = await self._dispatch(frame, peer)
                if reply.data is not None:
                    writer.write(reply.data)
                    await writer.drain()
                if reply.close:
                    break
        except BadInputError as bad:
            self.broker.counters.connections_closed_on_bad_input += 1
            log.warning("closing connection from %s: %s", peer, bad)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # a bug of ours: lose this connection, never the server
            log.exception(
                "closing connection from %s after an internal error serving %s", peer, _named(frame)
            )
        finally:
            self._connections.pop(task, None)
            writer.transport.abort()

    async def _read_frame(self, reader: asyncio.StreamReader) -> bytes | None:
        """One request frame; None on a clean end of stream between frames."""
        try:
            prefix = await reader.readexactly(SIZE_PREFIX.size)
        except asyncio.IncompleteReadError as eof:
            if eof.partial:
                raise BadInputError("truncated size prefix") from None
            return None
        (size,) = SIZE_PREFIX.unpack(prefix)
        if size < HEADER_PREFIX.size or size > self.broker.config.max_frame_bytes:
            raise BadInputError(f"frame size {size} outside {HEADER_PREFIX.size}..max-frame-bytes")
        try:
            return await reader.readexactly(size)
        except asyncio.IncompleteReadError as eof:
            raise BadInputError(f"truncated frame: {len(eof.partial)} of {size} bytes") from None

    async def _dispatch(self, frame: bytes, peer: object) -> Reply:
        api_key, api_version, correlation_id = HEADER_PREFIX.unpack_from(frame)
        self.broker.counters.count_request(api_key)
        handler = self.handlers.get(api_key)
        if handler is None:
            raise BadInputError(f"API key {api_key} is not served")
        if isinstance(handler, ApiVersionsHandler) and not handler.supports(api_version):
            return Reply(_frame(correlation_id, handler.unsupported_version_response()))
        request_type, response_type = _schemas(api_key, api_version)
        try:  # before kio's native reader, which would allocate what a lying count says
            header_end = check_lengths(request_type.__header_schema__, frame)
            check_lengths(request_type, frame, header_end)
        except LyingLengthError as lying:
            raise BadInputError(f"{api_name(api_key)} v{api_version} request: {lying}") from None
        try:
            header, header_size = decode(request_type.__header_schema__, frame)
            request, _ = decode(request_type, frame, header_size)
        except Exception as undecodable:
            raise BadInputError(
                f"undecodable {api_name(api_key)} v{api_version} request: {undecodable!r}"
            ) from None
        if (null := null_field(request)) is not None:
            raise BadInputError(f"{api_name(api_key)} v{api_version} request: null {null}")
        host = f"/{peer[0]}" if isinstance(peer, tuple) else ""
        ctx = RequestContext(self.broker, api_version, response_type, header.client_id, host)
        if not handler.supports(api_version):
            return Reply(_frame(correlation_id, handler.reject(request, ctx, UNSUPPORTED)))
        fault = self.broker.request_faults.take(api_key)
        if isinstance(fault, FailRequest):
            self._record_fault(fault, api_key, header, error=error_name(fault.error))
            return Reply(_frame(correlation_id, handler.reject(request, ctx, fault.error)))
        if isinstance(fault, LoseRequest):
            self._record_fault(fault, api_key, header)
            return Reply(None, close=True)
        try:
            response = await handler.handle(request, ctx)
        except ConnectionAbortedError as reason:
            log.info("closing connection: %s", reason)
            return Reply(None, close=True)
        except Exception:  # a storage or handler bug: Kafka answers UNKNOWN_SERVER_ERROR
            log.exception("%s v%d failed inside the broker", api_name(api_key), api_version)
            response = handler.reject(request, ctx, ErrorCode.unknown_server_error)
        if isinstance(fault, DropResponse):
            self._record_fault(fault, api_key, header, reset=fault.reset)
            return Reply(None, close=fault.reset)
        return Reply(None if response is None else _frame(correlation_id, response))

    def _record_fault(
        self, fault: RequestFault, api_key: int, header: object, **details: object
    ) -> None:
        name = api_name(api_key)
        self.broker.counters.request_fault(fault.counter, name)
        self.broker.fault_log.record(
            event=FAULT_EVENTS[fault.counter],
            api=name,
            correlation_id=getattr(header, "correlation_id", None),
            client_id=getattr(header, "client_id", None),
            **details,
        )


UNSUPPORTED = ErrorCode.unsupported_version
FAULT_EVENTS = {
    "requests_failed": "request-failed",
    "requests_lost": "request-lost",
    "responses_dropped": "response-dropped",
}
"""The fault log's event for each request fault (named after its counter)."""


def _schemas(api_key: int, api_version: int) -> tuple[Any, Any]:
    """kio's request and response classes; versions kio lacks cannot even be refused."""
    try:
        return load_request_schema(api_key, api_version), load_response_schema(api_key, api_version)
    except KioIndexError:
        raise BadInputError(f"{api_name(api_key)} v{api_version} has no schema") from None


def _named(frame: bytes | None) -> str:
    """ "Metadata v13": the API and version of a request frame, for the log."""
    if frame is None or len(frame) < HEADER_PREFIX.size:
        return "no request"
    api_key, api_version, _ = HEADER_PREFIX.unpack_from(frame)
    return f"{api_name(api_key)} v{api_version}"


def _frame(correlation_id: int, response: Any) -> bytes:
    """Size prefix + the response header version this response type requires + body."""
    header_type = type(response).__header_schema__
    payload = encode(header_type(correlation_id=correlation_id), response)
    return SIZE_PREFIX.pack(len(payload)) + payload

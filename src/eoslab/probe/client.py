"""A small synchronous Kafka protocol client: any kio request entity, at its own version.

For crafted requests the real clients refuse to send (six in flight, sequence jumps,
stale epochs) and for hostile input. Requests may be pipelined: `send` several, then
`receive` their responses in order, as Kafka answers them.
"""

from __future__ import annotations

import select
import socket
from collections import deque
from types import TracebackType
from typing import Any

from kio.serial.readers import read_int32

from eoslab.kafka_api import SIZE_PREFIX, decode_response, encode_request
from eoslab.kio_entities import response_type

PRODUCE_API_KEY = 0


class ConnectionClosedError(ConnectionError):
    """The broker closed the connection (as Kafka does on malformed or refused input)."""


class KafkaProtocolClient:
    def __init__(
        self, host: str, port: int, *, client_id: str = "eoslab-probe", timeout_s: float = 10.0
    ) -> None:
        self.client_id = client_id
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_correlation_id = 0
        self._pending: deque[tuple[int, Any]] = deque()

    def __enter__(self) -> KafkaProtocolClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def send(self, request: Any) -> int:
        """Send one request (header version from its schema); returns its correlation id.

        A Produce request with acks=0 gets no response, so none is awaited for it.
        """
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self.send_raw(encode_request(request, correlation_id, self.client_id))
        if not (request.__api_key__ == PRODUCE_API_KEY and request.acks == 0):
            self._pending.append((correlation_id, response_type(type(request))))
        return correlation_id

    def receive(self) -> Any:
        """The next response. Requests answered out of turn were never answered (a broker
        that swallows responses, like the reference broker's drop-response fault): their
        pending entries are skipped."""
        frame = self.receive_frame()
        correlation_id, _ = read_int32(frame, 0)  # first field of every response header
        while self._pending:
            expected, response_type = self._pending.popleft()
            if expected == correlation_id:
                return decode_response(frame, response_type)
        raise ValueError(f"response with correlation id {correlation_id} matches no request")

    def unanswered(self) -> list[int]:
        """Correlation ids still waiting for a response."""
        return [correlation_id for correlation_id, _ in self._pending]

    def request(self, request: Any) -> Any:
        self.send(request)
        return self.receive()

    def send_raw(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as closed:
            raise ConnectionClosedError(str(closed)) from None

    def receive_frame(self) -> bytes:
        """One size-prefixed frame, without the prefix."""
        (size,) = SIZE_PREFIX.unpack(self._read_exactly(SIZE_PREFIX.size))
        return self._read_exactly(size)

    def answer_ready(self, timeout_s: float) -> bool:
        """Whether response bytes arrive within `timeout_s` (they are left unread)."""
        readable, _, _ = select.select([self._sock], [], [], timeout_s)
        return bool(readable)

    def closed_by_peer(self) -> bool:
        """Wait (up to the socket timeout) for the broker to close; True if it did."""
        try:
            while chunk := self._sock.recv(65536):
                del chunk
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return True

    def _read_exactly(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            try:
                chunk = self._sock.recv(size - len(chunks))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionClosedError(f"closed after {len(chunks)} of {size} bytes")
            chunks += chunk
        return bytes(chunks)

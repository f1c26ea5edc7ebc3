"""Kafka wire framing as the proxy sees it: size-prefixed frames, and only their first bytes.

Every Kafka message is an int32 size followed by that many bytes. A request starts with
api_key (int16), api_version (int16) and correlation_id (int32); a response starts with the
correlation_id of the request it answers. The proxy reads nothing else, so forwarding stays
cheap and independent of API versions.
"""

import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SIZE_PREFIX = 4
REQUEST_HEADER_PREFIX = struct.Struct(">hhi")
RESPONSE_CORRELATION_ID = struct.Struct(">i")
FRAME_SIZE = struct.Struct(">i")
# Kafka's own socket.request.max.bytes default is 100 MiB; anything larger is not Kafka traffic.
MAX_FRAME_SIZE = 128 * 1024 * 1024


class FramingError(ValueError):
    """The byte stream is not a sequence of Kafka frames (negative, oversized or short frame)."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int


def read_request_header(buffer: memoryview | bytes, frame_start: int = 0) -> RequestHeader:
    """The request header prefix of the frame starting at `frame_start` (its size prefix)."""
    if len(buffer) - frame_start < SIZE_PREFIX + REQUEST_HEADER_PREFIX.size:
        raise FramingError("request frame shorter than its header (api_key, version, correlation)")
    return RequestHeader(*REQUEST_HEADER_PREFIX.unpack_from(buffer, frame_start + SIZE_PREFIX))


def read_response_correlation_id(buffer: memoryview | bytes, frame_start: int = 0) -> int:
    """The correlation id of the response frame starting at `frame_start` (its size prefix)."""
    if len(buffer) - frame_start < SIZE_PREFIX + RESPONSE_CORRELATION_ID.size:
        raise FramingError("response frame shorter than its correlation id")
    return RESPONSE_CORRELATION_ID.unpack_from(buffer, frame_start + SIZE_PREFIX)[0]


@dataclass(slots=True)
class FrameRun:
    """What one read yields: consecutive slices of a single buffer.

    First `lead` bytes that continue a frame already released by `FrameSplitter.release_partial`,
    then whole frames ending at `ends`. Keeping them as offsets into one buffer lets the proxy
    write several untouched frames with one call and without copying them.
    """

    buffer: memoryview
    ends: list[int]
    lead: int = 0

    def __len__(self) -> int:
        return len(self.ends)

    def start(self, index: int) -> int:
        return self.ends[index - 1] if index else self.lead

    def frame(self, index: int) -> memoryview:
        return self.buffer[self.start(index) : self.ends[index]]

    def __iter__(self) -> Iterator[memoryview]:
        return (self.frame(index) for index in range(len(self.ends)))


class FrameSplitter:
    """Cuts a byte stream into whole frames, whatever the read boundaries are.

    A frame split across reads is kept back as the list of its pieces, joined once. When the
    proxy has nothing to decide about a frame but its header, it can instead release the
    frame's first part at once and take the rest as it comes (`release_partial`), so large
    Produce requests are neither held back nor copied again.
    """

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._max_frame_size = max_frame_size
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._needed = SIZE_PREFIX
        self._released_rest = 0

    @property
    def pending_size(self) -> int:
        """Bytes of an incomplete frame held back."""
        return self._pending_size

    @property
    def releasing(self) -> bool:
        """Whether a frame is half through: its start released, its rest still to come."""
        return self._released_rest > 0

    def feed(self, data: bytes) -> FrameRun:
        """The frames completed by `data`; raises FramingError on a bad size prefix."""
        lead = 0
        if self._released_rest:
            lead = min(self._released_rest, len(data))
            self._released_rest -= lead
        elif self._pending:
            self._pending.append(data)
            self._pending_size += len(data)
            if self._pending_size < self._needed:
                return FrameRun(memoryview(b""), [])
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
        total = len(data)
        ends: list[int] = []
        position = lead
        needed = SIZE_PREFIX
        while total - position >= SIZE_PREFIX:
            (size,) = FRAME_SIZE.unpack_from(data, position)
            if size < 0 or size > self._max_frame_size:
                raise FramingError(f"frame size {size} outside [0, {self._max_frame_size}]")
            end = position + SIZE_PREFIX + size
            if end > total:
                needed = end - position
                break
            ends.append(end)
            position = end
        if position < total:
            self._pending.append(data[position:])
            self._pending_size = total - position
            self._needed = needed
        return FrameRun(memoryview(data), ends, lead)

    def release_partial(
        self,
        header_size: int,
        min_frame_size: int = 0,
        whole: Callable[[bytes], bool] | None = None,
    ) -> bytes | None:
        """The held-back start of an incomplete frame of at least `min_frame_size` bytes, if
        its header is in and `whole` (given that start) does not say the frame must be held
        back whole; the rest of that frame then comes out of `feed` as `lead` bytes."""
        if self._pending_size < SIZE_PREFIX + header_size or self._needed < min_frame_size:
            return None
        released = b"".join(self._pending)
        if whole is not None and whole(released):
            self._pending[:] = [released]
            return None
        self._released_rest = self._needed - len(released)
        self._pending.clear()
        self._pending_size = 0
        self._needed = SIZE_PREFIX
        return released


@dataclass(frozen=True, slots=True)
class InFlightRequest:
    api_key: int
    api_version: int
    sent_at: float


class InFlightRequests:
    """Per connection: correlation id → the request it belongs to, so responses get an API.

    Requests that are never answered (Produce with acks=0) would pile up; beyond `capacity`
    the oldest entry is forgotten.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._requests: dict[int, InFlightRequest] = {}
        self._capacity = capacity

    def __len__(self) -> int:
        return len(self._requests)

    def sent(self, header: RequestHeader, at: float | None = None) -> None:
        if len(self._requests) >= self._capacity:
            del self._requests[next(iter(self._requests))]
        self._requests[header.correlation_id] = InFlightRequest(
            header.api_key, header.api_version, time.monotonic() if at is None else at
        )

    def peek(self, correlation_id: int) -> InFlightRequest | None:
        """The request a response will answer (left in the map)."""
        return self._requests.get(correlation_id)

    def answered(self, correlation_id: int) -> InFlightRequest | None:
        """The request a response answers (removed from the map), None if unknown."""
        return self._requests.pop(correlation_id, None)

    def forget(self, correlation_id: int) -> None:
        """A request that will never be answered (the proxy swallowed it)."""
        self._requests.pop(correlation_id, None)

    def newest(self) -> int | None:
        """The correlation id of the last request sent and not yet answered."""
        return next(reversed(self._requests), None)

    def unanswered(self) -> frozenset[int]:
        return frozenset(self._requests)


@dataclass(slots=True)
class _Answer:
    frame: bytes
    before: frozenset[int]
    """The requests sent before it and not answered when it was made."""
    last: int | None
    """The newest of them: it goes out right after that one's response."""


class ProxyAnswers:
    """Per connection: the responses the proxy gives in place of requests it did not forward,
    each released after the responses to the requests sent before it. A broker answers a
    connection's requests in order, and clients rely on it (the Java client refuses a response
    whose correlation id is not its oldest request's)."""

    def __init__(self) -> None:
        self.queue: deque[_Answer] = deque()
        """Empty (falsy) on the fast path."""

    def add(self, frame: bytes, in_flight: InFlightRequests, streaming: bool) -> bytes | None:
        """Queue the answer to a request just swallowed; the frame itself when it may go now
        (nothing sent before it awaits an answer, no response is half through: ``streaming``)."""
        last = in_flight.newest()
        if last is None and not self.queue and not streaming:
            return frame
        if last is None and self.queue:
            last = self.queue[-1].last
        self.queue.append(_Answer(frame, in_flight.unanswered(), last))
        return None

    def settled(self) -> list[bytes]:
        """The answers that waited only for a response streamed through in parts to end."""
        settled = []
        while self.queue and not self.queue[0].before:
            settled.append(self.queue.popleft().frame)
        return settled

    def around(self, correlation_id: int) -> tuple[list[bytes], list[bytes]]:
        """The answers due just before and just after the response to ``correlation_id``.
        Before: those made before its request was sent (their requests were answered or never
        will be: responses come in order). After: those waiting for exactly this response."""
        before = []
        while self.queue and correlation_id not in self.queue[0].before:
            before.append(self.queue.popleft().frame)
        after = []
        while self.queue and self.queue[0].last == correlation_id:
            after.append(self.queue.popleft().frame)
        return before, after

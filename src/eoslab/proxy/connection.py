"""One client connection through the proxy: two pumps (requests up, responses down).

The hot path reads large chunks, cuts them into frames, reads only the header prefix of
each, and writes runs of untouched frames with a single call, as slices of the bytes read.
Only frames that trigger a fault leave that path.
"""

import asyncio
import contextlib
import sys
from collections import deque
from dataclasses import dataclass

from eoslab.control.fault_log import FaultLog
from eoslab.proxy.faults.spec import Direction, FrameContext, FrameVerdict
from eoslab.proxy.faults.table import FaultTable
from eoslab.proxy.framing import (
    FRAME_SIZE,
    REQUEST_HEADER_PREFIX,
    RESPONSE_CORRELATION_ID,
    SIZE_PREFIX,
    FrameRun,
    FrameSplitter,
    FramingError,
    InFlightRequests,
    ProxyAnswers,
    read_request_header,
    read_response_correlation_id,
)
from eoslab.proxy.fronting import Fronting
from eoslab.proxy.traffic_counters import UNMATCHED_RESPONSE, TrafficCounters

READ_SIZE = 1024 * 1024
# StreamReader pauses the socket beyond twice its limit; the default 64 KiB is too small.
STREAM_LIMIT = 1024 * 1024
# Delayed frames queued per direction before the pump stops reading (backpressure).
MAX_DELAYED_BYTES = 64 * 1024 * 1024
# Frames at least this large are forwarded as they arrive rather than once complete.
STREAMED_FRAME_SIZE = 256 * 1024
HEADER_SIZES = {
    Direction.REQUEST: REQUEST_HEADER_PREFIX.size,
    Direction.RESPONSE: RESPONSE_CORRELATION_ID.size,
}


@dataclass(frozen=True, slots=True)
class ProxyServices:
    """What every connection shares: the faults, the counters, the log, the partition gate,
    and when the proxy fronts a cluster, the endpoint rewriting."""

    faults: FaultTable
    counters: TrafficCounters
    fault_log: FaultLog
    gate: "BlackholeGate"
    fronting: Fronting | None = None


class BlackholeGate:
    """Makes traffic wait while its route is blackholed; wakes on fault changes and window ends."""

    def __init__(self, faults: FaultTable) -> None:
        self._faults = faults
        self._changed = asyncio.Event()
        faults.on_change(self._wake)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_open(self, route: str) -> None:
        while (end := self._faults.blackhole_end(route)) is not None:
            changed = self._changed
            timeout = None if end == float("inf") else max(0.0, end - self._faults.clock()) + 1e-3
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout)


class Outbox:
    """In-order delivery to one socket, at once or at a due time (delay, latency, bandwidth).

    A frame due later holds back every frame after it, as on a real link.
    """

    def __init__(self, writer: asyncio.StreamWriter, faults: FaultTable) -> None:
        self._writer = writer
        self._clock = faults.clock
        self._queue: deque[tuple[float, memoryview]] = deque()
        self._queued_bytes = 0
        self._last_due = 0.0
        self._delivery: asyncio.Task[None] | None = None
        self._delivered = asyncio.Event()

    def send(self, data: memoryview, due: float | None = None) -> None:
        if due is None and not self._queue:
            self._writer.write(data)
            return
        due = max(self._clock() if due is None else due, self._last_due)
        self._last_due = due
        self._queue.append((due, data))
        self._queued_bytes += len(data)
        if self._delivery is None:
            self._delivery = asyncio.create_task(self._deliver())

    async def drain(self) -> None:
        """Backpressure: wait for the socket, and for the delay queue to shrink if it is long."""
        await self._writer.drain()
        while self._queued_bytes > MAX_DELAYED_BYTES:
            self._delivered.clear()
            await self._delivered.wait()

    async def flush(self) -> None:
        """Deliver everything queued (before a clean close)."""
        if self._delivery is not None:
            await self._delivery
        await self._writer.drain()

    def cancel(self) -> None:
        if self._delivery is not None:
            self._delivery.cancel()

    async def _deliver(self) -> None:
        try:
            while self._queue:
                due, data = self._queue[0]
                wait_s = due - self._clock()
                if wait_s > 0:
                    await asyncio.sleep(wait_s)
                self._queue.popleft()
                self._queued_bytes -= len(data)
                self._writer.write(data)
                self._delivered.set()
                await self._writer.drain()
        except ConnectionError:
            self._queue.clear()
        finally:
            self._delivery = None


class ProxiedConnection:
    def __init__(
        self,
        connection_id: int,
        route: str,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        services: ProxyServices,
    ) -> None:
        self.id = connection_id
        self.route = route
        self._client_reader, self._client_writer = client
        self._upstream_reader, self._upstream_writer = upstream
        self._services = services
        self._in_flight = InFlightRequests()
        self._answers = ProxyAnswers()
        self._splitters = {direction: FrameSplitter() for direction in Direction}
        self._to_upstream = Outbox(self._upstream_writer, services.faults)
        self._to_client = Outbox(self._client_writer, services.faults)
        self._closed = False

    async def run(self) -> None:
        """Pump both ways until either side closes, then close the other."""
        pumps = [
            asyncio.create_task(
                self._pump(self._client_reader, self._to_upstream, Direction.REQUEST)
            ),
            asyncio.create_task(
                self._pump(self._upstream_reader, self._to_client, Direction.RESPONSE)
            ),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            await self._close()

    def reset(self) -> None:
        """Close both sides now: what was forwarded is delivered, delayed frames are lost.

        A graceful close rather than a TCP RST, so that exactly the frames a fault chose
        are lost, whatever the timing; clients treat both as a broken connection.
        """
        if self._closed:
            return
        self._closed = True
        self._to_upstream.cancel()
        self._to_client.cancel()
        self._client_writer.close()
        self._upstream_writer.close()

    async def _close(self) -> None:
        self.reset()
        for writer in (self._client_writer, self._upstream_writer):
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _pump(
        self, reader: asyncio.StreamReader, outbox: Outbox, direction: Direction
    ) -> None:
        splitter = self._splitters[direction]
        try:
            while data := await reader.read(READ_SIZE):
                if not await self._forward(splitter, splitter.feed(data), outbox, direction):
                    return
            await outbox.flush()
        except FramingError as error:
            print(f"chaos proxy: {self.route} connection {self.id}: {error}", file=sys.stderr)
        except ConnectionError:
            return

    async def _forward(
        self, splitter: FrameSplitter, run: FrameRun, outbox: Outbox, direction: Direction
    ) -> bool:
        """Forward one run of frames; False once the connection has been reset."""
        faults = self._services.faults.for_route(self.route)
        answers = self._answers.queue if direction is Direction.RESPONSE else ()
        fronting = self._services.fronting if direction is Direction.RESPONSE else None
        buffer = run.buffer
        untouched_from = 0
        start = run.lead
        for end in run.ends:
            api_key, api_version, correlation_id = self._seen(buffer, start, end - start, direction)
            rewritten = None
            if fronting is not None and fronting.rewrites(api_key):
                rewritten = await fronting.rewritten(buffer[start:end], api_key, api_version)
            if faults or answers or rewritten is not None:
                view, at, size = (
                    (buffer, start, end - start)
                    if rewritten is None
                    else (memoryview(rewritten), 0, len(rewritten))
                )
                frame = FrameContext(
                    self.route,
                    direction,
                    api_key,
                    api_version,
                    correlation_id,
                    size,
                    self.id,
                    view,
                    at,
                )
                verdict = self._services.faults.judge(frame, faults) if faults else None
                if verdict is not None or answers or rewritten is not None:
                    if start > untouched_from:
                        outbox.send(buffer[untouched_from:start])
                    untouched_from = end
                    if not await self._pass(verdict, frame, view[at : at + size], outbox):
                        return False
            start = end
        if start > untouched_from:
            outbox.send(buffer[untouched_from:start])
        if answers and not splitter.releasing:
            for answer in self._answers.settled():
                outbox.send(memoryview(answer))
        if not faults and not answers:
            header_size = HEADER_SIZES[direction]
            whole = None if fronting is None else self._rewritten_whole
            partial = splitter.release_partial(header_size, STREAMED_FRAME_SIZE, whole)
            if partial is not None:
                self._seen(partial, 0, SIZE_PREFIX + FRAME_SIZE.unpack_from(partial)[0], direction)
                outbox.send(memoryview(partial))
        await outbox.drain()
        return True

    def _rewritten_whole(self, frame_start: bytes) -> bool:
        """Whether a response, of which this is the start, is one the fronting proxy rewrites
        (it never goes out in parts)."""
        request = self._in_flight.peek(read_response_correlation_id(frame_start))
        return request is not None and Fronting.rewrites(request.api_key)

    def _seen(
        self, buffer: memoryview | bytes, start: int, size: int, direction: Direction
    ) -> tuple[int, int, int]:
        """Count a frame and pair it with its request: (api_key, api_version, correlation_id)."""
        if direction is Direction.REQUEST:
            header = read_request_header(buffer, start)
            self._in_flight.sent(header)
            api_key, api_version = header.api_key, header.api_version
            correlation_id = header.correlation_id
        else:
            correlation_id = read_response_correlation_id(buffer, start)
            request = self._in_flight.answered(correlation_id)
            api_key, api_version = (
                (UNMATCHED_RESPONSE, -1)
                if request is None
                else (request.api_key, request.api_version)
            )
        self._services.counters.frame(self.route, api_key, direction, size)
        return api_key, api_version, correlation_id

    async def _pass(
        self, verdict: FrameVerdict | None, frame: FrameContext, data: memoryview, outbox: Outbox
    ) -> bool:
        """Pass on one frame that left the fast path: a fault's verdict on it, or the proxy's
        own answers due around it (a response); False once the connection has been reset."""
        answered = frame.direction is Direction.RESPONSE and self._answers.queue
        before, after = self._answers.around(frame.correlation_id) if answered else ((), ())
        for answer in before:
            outbox.send(memoryview(answer))
        if verdict is None:
            outbox.send(data)
        elif not await self._apply(verdict, frame, data, outbox):
            return False
        for answer in after:
            outbox.send(memoryview(answer))
        return True

    async def _apply(
        self, verdict: FrameVerdict, frame: FrameContext, data: memoryview, outbox: Outbox
    ) -> bool:
        """Carry out a verdict on one frame; False once the connection has been reset."""
        for fault, delay_s in verdict.hits:
            entry = fault.frame_entry(frame, delay_s) | verdict.notes.get(fault.id, {})
            self._services.fault_log.record(**entry)
        if verdict.hold:
            await outbox.drain()
            await self._services.gate.wait_open(self.route)
        if verdict.drop and frame.direction is Direction.REQUEST:
            self._in_flight.forget(frame.correlation_id)
        if verdict.answer is not None:
            self._answer(verdict.answer)
        if verdict.reset:
            self.reset()
            return False
        if not verdict.drop:
            outbox.send(
                data if verdict.replace is None else memoryview(verdict.replace),
                verdict.deliver_at,
            )
        return True

    def _answer(self, response: bytes) -> None:
        """Give the client the proxy's own response to a request it swallowed, in its turn."""
        streaming = self._splitters[Direction.RESPONSE].releasing
        due_now = self._answers.add(response, self._in_flight, streaming)
        if due_now is not None:
            self._to_client.send(memoryview(due_now))

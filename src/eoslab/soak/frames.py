"""Send malformed frames to a reference broker over raw TCP and classify what each one got.

Frames whose size prefix is honest go many to a connection (a new one once the broker closes
it); frames whose prefix lies go alone on a connection that is half-closed after them (else
the broker would rightly wait for the bytes promised). Outcomes (:data:`OUTCOMES`):

- ``answered``: a response with the frame's correlation id;
- ``closed``: the broker closed the connection without answering;
- ``silent-acks-0``, ``waiting-as-asked``, ``group-barrier``: no answer within the timeout,
  and the request itself explains it (Produce with acks=0 gets no response; a timeout field
  longer than ours, such as Fetch's max_wait; a JoinGroup or SyncGroup waiting for the
  group's other members), while the broker answers on a fresh connection;
- ``hang``: no answer, no close, and nothing in the request explains it (a failure);
- ``wrong-correlation-id``: a response, but not to this frame (a failure);
- ``refused``: no connection to send it on (the broker is gone: a failure).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from kio.index import load_request_schema

from eoslab.kafka_api import api_name
from eoslab.refbroker.protocol import decode
from eoslab.soak.broker import HOST
from eoslab.soak.mutator import Frame

OUTCOMES = (
    "answered",
    "closed",
    "silent-acks-0",
    "waiting-as-asked",
    "group-barrier",
    "hang",
    "wrong-correlation-id",
    "refused",
)
FAILURES = ("hang", "wrong-correlation-id", "refused")
GROUP_BARRIER_APIS = {11, 14}
"""JoinGroup and SyncGroup: answered when the group's other members arrive (or time out)."""
PRODUCE = 0
FETCH = 1
"""The one API the broker holds for as long as the request asks (max_wait)."""
MAX_FINDINGS = 20
"""Failures kept with their frame (every failure up to this many)."""
MAX_EXAMPLES = 3
"""Frames kept of each explained silence, as examples of what explains it."""


@dataclass
class FrameTally:
    """Every frame's outcome, by mutation and by API; failures kept as findings (hex), a few
    examples of each explained silence beside them."""

    outcomes: Counter[str] = field(default_factory=Counter)
    by_mutation: dict[str, Counter[str]] = field(default_factory=dict)
    by_api: Counter[str] = field(default_factory=Counter)
    connections: int = 0
    findings: list[dict[str, object]] = field(default_factory=list)
    examples: list[dict[str, object]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def add(self, frame: Frame, outcome: str) -> None:
        self.outcomes[outcome] += 1
        self.by_mutation.setdefault(frame.mutation, Counter())[outcome] += 1
        self.by_api[api_name(frame.api_key)] += 1
        if outcome in FAILURES:
            kept, room = self.findings, len(self.findings) < MAX_FINDINGS
        elif outcome in ("answered", "closed"):
            return
        else:
            kept = self.examples
            room = sum(1 for e in kept if e["outcome"] == outcome) < MAX_EXAMPLES
        if room:
            kept.append(
                {
                    "index": frame.index,
                    "at_s": round(time.monotonic() - self.started, 1),
                    "api": api_name(frame.api_key),
                    "version": frame.api_version,
                    "mutation": frame.mutation,
                    "wire_api_key": int.from_bytes(frame.data[4:6], "big", signed=True),
                    "outcome": outcome,
                    "frame_hex": frame.data[:2048].hex(),
                }
            )

    @property
    def frames(self) -> int:
        return sum(self.outcomes.values())

    @property
    def failures(self) -> int:
        return sum(self.outcomes[name] for name in FAILURES)


def explain_silence(frame: Frame, timeout_s: float) -> str:
    """Why a frame may rightly get no answer within ``timeout_s``; "hang" when nothing does.

    The frame is decoded as the broker decodes it (the first frame its size prefix marks)."""
    body = frame.data[4:]
    (size,) = struct.unpack_from(">i", frame.data) if len(frame.data) >= 4 else (0,)
    body = body[:size] if 8 <= size <= len(body) else b""
    if len(body) < 8:
        return "hang"
    api_key, api_version = struct.unpack_from(">hh", body)
    try:
        request_type = load_request_schema(api_key, api_version)
        _header, header_size = decode(request_type.__header_schema__, body)
        request, _ = decode(request_type, body, header_size)
    except Exception:  # undecodable (KioIndexError included): nothing explains a silence
        return "hang"
    if api_key == PRODUCE and request.acks == 0:
        return "silent-acks-0"
    if api_key in GROUP_BARRIER_APIS:
        return "group-barrier"
    if api_key == FETCH and request.max_wait.total_seconds() >= timeout_s:
        return "waiting-as-asked"
    return "hang"


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class FrameSender:
    """``workers`` concurrent connections draining one frame iterator."""

    def __init__(self, port: int, frames: Iterator[Frame], timeout_s: float, workers: int) -> None:
        self.port = port
        self.frames = frames
        self.timeout_s = timeout_s
        self.workers = workers
        self.tally = FrameTally()
        self.broker_unresponsive = 0
        """Silences during which a fresh connection got no answer either (the broker hung)."""

    async def run(self) -> FrameTally:
        await asyncio.gather(*(self._worker() for _ in range(self.workers)))
        return self.tally

    async def _connect(self) -> Connection:
        self.tally.connections += 1
        return await asyncio.wait_for(asyncio.open_connection(HOST, self.port), self.timeout_s)

    async def _worker(self) -> None:
        connection: Connection | None = None
        for frame in self.frames:  # one shared iterator: each frame goes to one worker
            try:
                if not frame.consistent:
                    outcome = await self._alone(frame)
                else:
                    if connection is None:
                        connection = await self._connect()
                    outcome, keep = await self._exchange(connection, frame)
                    if not keep:
                        connection[1].transport.abort()
                        connection = None
            except (OSError, TimeoutError):  # the connect itself failed
                outcome = "refused"
            if outcome == "hang" and not await self._broker_answers():
                self.broker_unresponsive += 1
            self.tally.add(frame, outcome)
        if connection is not None:
            connection[1].transport.abort()

    async def _exchange(self, connection: Connection, frame: Frame) -> tuple[str, bool]:
        """(outcome, whether the connection is still usable)."""
        reader, writer = connection
        try:
            writer.write(frame.data)
            await writer.drain()
            prefix = await asyncio.wait_for(reader.readexactly(4), self.timeout_s)
            (size,) = struct.unpack(">i", prefix)
            body = await asyncio.wait_for(reader.readexactly(size), self.timeout_s)
        except (asyncio.IncompleteReadError, ConnectionError):
            return "closed", False
        except TimeoutError:
            return explain_silence(frame, self.timeout_s), False
        answered = body[:4] == struct.pack(">i", frame.correlation_id or 0)
        return ("answered", True) if answered else ("wrong-correlation-id", False)

    async def _alone(self, frame: Frame) -> str:
        """A lying frame on its own connection, half-closed: answers (if any), then the close."""
        reader, writer = await self._connect()
        try:
            writer.write(frame.data)
            writer.write_eof()
            data = await asyncio.wait_for(reader.read(), self.timeout_s)
        except ConnectionError:
            return "closed"
        except TimeoutError:
            return explain_silence(frame, self.timeout_s)
        finally:
            writer.transport.abort()
        if len(data) >= 8:
            return (
                "answered"
                if data[4:8] == struct.pack(">i", frame.correlation_id or 0)
                else "wrong-correlation-id"
            )
        return "closed"

    async def _broker_answers(self) -> bool:
        """Whether the broker answers ApiVersions on a fresh connection within the timeout."""
        probe = b"\x00\x12\x00\x00\x7f\xff\xff\xff\x00\x05probe"  # ApiVersions v0, header v1
        try:
            reader, writer = await self._connect()
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(struct.pack(">i", len(probe)) + probe)
            await asyncio.wait_for(reader.readexactly(8), self.timeout_s)
            return True
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            return False
        finally:
            writer.transport.abort()


def send_frames(
    port: int, frames: Iterator[Frame], timeout_s: float, workers: int
) -> tuple[FrameTally, int, float]:
    """(the tally, silences during which the broker answered nobody, seconds)."""
    sender = FrameSender(port, frames, timeout_s, workers)
    begin = time.monotonic()
    tally = asyncio.run(sender.run())
    return tally, sender.broker_unresponsive, time.monotonic() - begin

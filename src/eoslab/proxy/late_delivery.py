"""The courier of the `late` fault: each captured request copy goes out when due, on a
connection of its own to its route's upstream (the broker, not the proxy's listener: the copy
is the network's, no client's), and the broker's answer is read, decoded with kio and kept in
the fault's evidence and the fault log. A copy still waiting when its fault is removed (or the
proxy stops) is not delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from eoslab.clock import now_ms
from eoslab.control.fault_log import FaultLog
from eoslab.proxy.connection import STREAM_LIMIT
from eoslab.proxy.faults.active import ActiveFault
from eoslab.proxy.faults.late import LateCopies, PendingCopy
from eoslab.proxy.faults.results import UnencodableError, answer_errors
from eoslab.proxy.faults.table import FaultTable
from eoslab.proxy.framing import FRAME_SIZE, MAX_FRAME_SIZE, SIZE_PREFIX
from eoslab.settings import HostPort

ANSWER_TIMEOUT_S = 30.0
"""How long a late copy's answer is awaited (Kafka's own request timeout is 30 s)."""
CONNECT_TIMEOUT_S = 10.0


class LateCourier:
    def __init__(
        self, upstreams: Mapping[str, HostPort], faults: FaultTable, fault_log: FaultLog
    ) -> None:
        self._upstreams = dict(upstreams)
        self._faults = faults
        self._fault_log = fault_log
        self._tasks: dict[int, tuple[PendingCopy, asyncio.Task[None]]] = {}
        self._released: dict[int, asyncio.Event] = {}
        faults.on_change(self._drop_removed)

    def add_upstream(self, route: str, upstream: HostPort) -> None:
        """A route opened after the proxy started."""
        self._upstreams[route] = upstream

    def attach(self, fault: ActiveFault) -> None:
        """Deliver the copies of ``fault`` (a late fault) from now on."""
        if isinstance(fault.state, LateCopies):
            fault.state.courier = self

    def captured(self, copy: PendingCopy) -> None:
        self._released[id(copy)] = asyncio.Event()
        self._tasks[id(copy)] = (copy, asyncio.create_task(self._deliver(copy)))

    def released(self, copy: PendingCopy) -> None:
        event = self._released.get(id(copy))
        if event is not None:
            event.set()

    async def stop(self) -> None:
        tasks = [task for _, task in self._tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _drop_removed(self) -> None:
        """Cancel the copies of faults no longer in the table."""
        present = {fault.id for fault in self._faults}
        for copy, task in list(self._tasks.values()):
            if copy.fault_id not in present:
                task.cancel()

    async def _deliver(self, copy: PendingCopy) -> None:
        evidence = copy.evidence
        try:
            if copy.waits:
                await self._released[id(copy)].wait()
            else:
                evidence.released_ms = evidence.captured_ms
            await asyncio.sleep(copy.after_s)
            answer = await self._exchange(copy)
            evidence.answered_ms = now_ms()
            evidence.answer = answer_errors(answer, copy.api_key, copy.api_version)
        except asyncio.CancelledError:
            evidence.failure = "the fault was removed before the copy was " + (
                "answered" if evidence.delivered_ms is not None else "delivered"
            )
        except (OSError, TimeoutError, asyncio.IncompleteReadError, UnencodableError) as error:
            evidence.failure = f"late delivery to {copy.evidence.route} failed: {_reason(error)}"
        finally:
            self._tasks.pop(id(copy), None)
            self._released.pop(id(copy), None)
            self._fault_log.record(
                fault_id=copy.fault_id,
                kind="late",
                route=evidence.route,
                connection=evidence.connection,
                direction="request",
                api=evidence.api,
                api_key=copy.api_key,
                correlation_id=evidence.correlation_id,
                late="answered" if evidence.answer is not None else "failed",
                answer=evidence.answer,
                failure=evidence.failure,
            )

    async def _exchange(self, copy: PendingCopy) -> bytes:
        """Send the copy on a fresh connection; the broker's answer (its frame)."""
        upstream = self._upstreams[copy.evidence.route]
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(upstream.host, upstream.port, limit=STREAM_LIMIT),
                CONNECT_TIMEOUT_S,
            )
        except TimeoutError:
            raise OSError(f"{upstream} not reached within {CONNECT_TIMEOUT_S:.0f} s") from None
        try:
            writer.write(copy.frame)
            await writer.drain()
            copy.evidence.delivered_ms = now_ms()
            return await asyncio.wait_for(_read_frame(reader), ANSWER_TIMEOUT_S)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    prefix = await reader.readexactly(SIZE_PREFIX)
    (size,) = FRAME_SIZE.unpack(prefix)
    if not 0 <= size <= MAX_FRAME_SIZE:
        raise UnencodableError(f"answer of {size} bytes")
    return prefix + await reader.readexactly(size)


def _reason(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within {ANSWER_TIMEOUT_S:.0f} s"
    if isinstance(error, asyncio.IncompleteReadError):
        return "the broker closed the connection without answering"
    return str(error) or type(error).__name__

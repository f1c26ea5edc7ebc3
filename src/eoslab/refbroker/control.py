"""The control API: JSON over plain HTTP/1.1 on 127.0.0.1 (default port 9199).

    GET    /faults    armed request faults, current rules and retained batches
    POST   /faults    apply one fault (a JSON object, see faults.py), answers its log entry
    DELETE /faults    disarm the request faults (an unavailable coordinator too), leave legacy mode
    GET    /counters  requests per API, produce outcomes, faults consumed
    GET    /log       the fault log (JSON lines) as one JSON array

Hand-rolled on asyncio streams rather than a web framework: none is among the pinned
dependencies, five routes do not justify one, and running in the broker's own event
loop makes every fault atomic with respect to request processing (a thread-based
server such as http.server would race the loop).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from pydantic import ValidationError

from eoslab.refbroker.broker import ReferenceBroker, now_ms
from eoslab.refbroker.faults import (
    FAULT_ADAPTER,
    CoordinatorUnavailable,
    CrashRestart,
    DropResponses,
    ExpireMember,
    ExpireProducers,
    FailRequests,
    Fault,
    ForceRebalance,
    LegacyMode,
    RetainBatches,
)
from eoslab.refbroker.server import KafkaProtocolServer

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_HEADER_LINES = 100
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: object


class ControlApi:
    def __init__(self, broker: ReferenceBroker, kafka_server: KafkaProtocolServer) -> None:
        self.broker = broker
        self.kafka_server = kafka_server
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        control = self.broker.config.control
        self._server = await asyncio.start_server(self._serve, control.host, control.port)
        log.info("control API listening on %s:%d", control.host, self.port)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def apply(self, fault: Fault) -> dict[str, object]:
        """Apply one fault now and log it; returns the fault-log entry."""
        broker = self.broker
        details: dict[str, object] = fault.model_dump(mode="json")
        match fault:
            case ExpireProducers(producer_id=producer_id):
                details["removed"] = broker.storage.expire_producers(
                    now_ms(), producer_id=producer_id, force=True
                )
            case RetainBatches(count=count):
                broker.storage.set_retained_batches(count)
            case DropResponses() | FailRequests():
                broker.request_faults.arm(fault)
            case CrashRestart():
                details["connections_dropped"] = self.kafka_server.disconnect_all()
                broker.crash_restart()
            case LegacyMode(enabled=enabled):
                details["rules"] = str(broker.set_legacy_mode(enabled))
            case ForceRebalance(group_id=group_id):
                details["state"] = broker.groups.force_rebalance(group_id)
            case ExpireMember(group_id=group_id, member_id=member_id):
                details["expired"] = broker.groups.expire_members(group_id, member_id)
            case CoordinatorUnavailable(count=count, error=error):
                broker.unavailable_coordinator.arm(count, error)
        return broker.fault_log.record("fault-applied", **details)

    def state(self) -> dict[str, object]:
        unavailable = self.broker.unavailable_coordinator
        return {
            "armed": self.broker.request_faults.as_json(),
            "coordinator_unavailable": {
                "remaining": unavailable.remaining,
                "error": unavailable.error.name.upper(),
            },
            "rules": str(self.broker.storage.rules),
            "configured_rules": str(self.broker.config.rules),
        }

    def route(self, method: str, path: str, body: bytes) -> HttpResponse:
        match method, path:
            case "GET", "/faults":
                return HttpResponse(200, self.state())
            case "POST", "/faults":
                try:
                    fault = FAULT_ADAPTER.validate_json(body)
                except ValidationError as invalid:
                    return HttpResponse(400, {"error": json.loads(invalid.json())})
                try:
                    return HttpResponse(200, self.apply(fault))
                except ValueError as refused:  # e.g. the storage layer's own bounds
                    return HttpResponse(400, {"error": str(refused)})
            case "DELETE", "/faults":
                self.broker.request_faults.clear()
                self.broker.unavailable_coordinator.clear()
                self.broker.set_legacy_mode(False)
                return HttpResponse(200, self.broker.fault_log.record("faults-cleared"))
            case "GET", "/counters":
                return HttpResponse(200, self.broker.counters.as_json())
            case "GET", "/log":
                return HttpResponse(200, self.broker.fault_log.entries())
            case _, ("/faults" | "/counters" | "/log"):
                return HttpResponse(405, {"error": f"{method} not allowed on {path}"})
        return HttpResponse(404, {"error": f"no route {path}"})

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            response = await self._read_and_route(reader)
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as bad:
            response = HttpResponse(400, {"error": f"malformed HTTP request: {bad}"})
        except ConnectionError:
            writer.close()
            return
        payload = json.dumps(response.body).encode()
        head = (
            f"HTTP/1.1 {response.status} {REASONS.get(response.status, '')}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        try:
            writer.write(head.encode() + payload)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _read_and_route(self, reader: asyncio.StreamReader) -> HttpResponse:
        request_line = (await reader.readline()).decode("latin-1").split()
        if len(request_line) != 3:
            raise ValueError("expected METHOD PATH VERSION")
        method, target, _version = request_line
        length = 0
        for _ in range(MAX_HEADER_LINES):
            line = (await reader.readline()).decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        else:
            raise ValueError("too many header lines")
        if not 0 <= length <= MAX_BODY_BYTES:
            raise ValueError(f"body of {length} bytes")
        body = await reader.readexactly(length)
        return self.route(method.upper(), target.split("?", 1)[0], body)

"""The reference broker's control API (JSON over HTTP on 127.0.0.1, default port 9199).

    GET    /faults    armed request faults, current rules and retained batches
    POST   /faults    apply one fault (a JSON object, see faults.py), answers its log entry
    DELETE /faults    back to the configured broker (request faults disarmed, the group
                      coordinator available, rules and duplicate-cache size as configured)
    GET    /counters  requests per API, produce outcomes, faults consumed
    GET    /log       the fault log entries

It runs in the broker's own event loop, so every fault is atomic with respect to request
processing.
"""

from __future__ import annotations

from http import HTTPStatus

from pydantic import ValidationError

from eoslab.control.http import HttpError, JsonHttpServer, json_object
from eoslab.kafka_api import error_name
from eoslab.refbroker.broker import ReferenceBroker
from eoslab.refbroker.faults import FAULT_ADAPTER, Fault
from eoslab.refbroker.server import KafkaProtocolServer


class ControlApi:
    def __init__(self, broker: ReferenceBroker, kafka_server: KafkaProtocolServer) -> None:
        self.broker = broker
        self.kafka_server = kafka_server
        self.http = JsonHttpServer(
            "refbroker control API",
            {
                ("GET", "/faults"): lambda _p, _b: self.state(),
                ("POST", "/faults"): lambda _p, body: self.apply(_parse(body)),
                ("DELETE", "/faults"): lambda _p, _b: self.clear(),
                ("GET", "/counters"): lambda _p, _b: broker.counters.as_json(),
                ("GET", "/log"): lambda _p, _b: broker.fault_log.entries(),
            },
        )

    async def start(self) -> None:
        control = self.broker.config.control
        await self.http.start(control.host, control.port)

    async def stop(self) -> None:
        await self.http.stop()

    def apply(self, fault: Fault) -> dict[str, object]:
        """Apply one fault now and log it; returns the fault-log entry."""
        try:
            effect = fault.apply(self.broker, self.kafka_server)
        except ValueError as refused:  # e.g. the storage layer's own bounds
            raise HttpError(HTTPStatus.BAD_REQUEST, str(refused)) from None
        return self.broker.fault_log.record(
            event="fault-applied", **{**fault.model_dump(mode="json"), **effect}
        )

    def clear(self) -> dict[str, object]:
        self.broker.clear_faults()
        return self.broker.fault_log.record(event="faults-cleared")

    def state(self) -> dict[str, object]:
        unavailable = self.broker.unavailable_coordinator
        return {
            "armed": self.broker.request_faults.as_json(),
            "coordinator_unavailable": {
                "remaining": unavailable.remaining,
                "error": error_name(unavailable.error),
            },
            "rules": str(self.broker.storage.rules),
            "configured_rules": str(self.broker.config.rules),
            "retained_batches": self.broker.storage.retained_batches,
            "configured_retained_batches": self.broker.config.retained_batches,
        }


def _parse(body: bytes) -> Fault:
    try:
        return FAULT_ADAPTER.validate_python(json_object(body))
    except ValidationError as invalid:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in invalid.errors(include_url=False)
        )
        raise HttpError(HTTPStatus.BAD_REQUEST, problems) from None

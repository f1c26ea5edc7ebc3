"""State and request faults the lab injects into the reference broker, one model per kind, each
applying itself: a new fault kind touches this file only.

A fault is one JSON object posted to the control API. The request-path faults (lost
responses, failed requests, an unavailable group coordinator) wait until the server consumes
them; the state faults (expiry, retained batches, crash-restart, legacy mode, a forced
rebalance, an expired group member) act at once. Every
application is written to the fault log with a wall-clock timestamp, so the run report can
draw it on the timeline. Kinds are spelt as the proxy's and the scenario steps' (kebab-case,
singular): ``drop-response`` is the lost ack wherever it is injected.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from eoslab.clock import now_ms
from eoslab.kafka_api import api_name, error_name, parse_api_key, parse_error

if TYPE_CHECKING:
    from eoslab.refbroker.broker import ReferenceBroker
    from eoslab.refbroker.server import KafkaProtocolServer


class _Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @abc.abstractmethod
    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        """Act on the broker now; returns what the fault did, for its log entry."""


class ExpireProducers(_Fault):
    """Remove one producer's state (or everyone's) from every partition, whatever its age."""

    kind: Literal["expire-producers"]
    producer_id: int | None = None

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        removed = broker.storage.expire_producers(
            now_ms(), producer_id=self.producer_id, force=True
        )
        return {"removed": removed}


class RetainBatches(_Fault):
    """Change how many batches per producer the duplicate cache keeps (Kafka: 5, fixed)."""

    kind: Literal["retained-batches"]
    count: int = Field(ge=1, le=1000)

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        broker.storage.set_retained_batches(self.count)
        return {}


class _ApiFault(_Fault):
    api: int
    count: int = Field(ge=1, le=1_000_000)

    @field_validator("api", mode="before")
    @classmethod
    def _api_key(cls, value: Any) -> int:
        return parse_api_key(value)

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        broker.request_faults.arm(self)
        return {"api": api_name(self.api)}


class DropResponse(_ApiFault):
    """Apply the next `count` requests of `api` but never answer them: the lost ack."""

    kind: Literal["drop-response"]
    reset: bool = True
    """Reset the connection after swallowing the response, as a broken network would."""


class FailRequest(_ApiFault):
    """Answer the next `count` requests of `api` with `error` without applying them."""

    kind: Literal["fail-request"]
    error: ErrorCode

    @field_validator("error", mode="before")
    @classmethod
    def _error_code(cls, value: Any) -> ErrorCode:
        return parse_error(value)


class CrashRestart(_Fault):
    """Drop all in-memory state and reopen the log from disk, like kill -9 and a restart."""

    kind: Literal["crash-restart"]

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        dropped = server.disconnect_all()
        broker.crash_restart()
        return {"connections_dropped": dropped}


class LegacyMode(_Fault):
    """Switch the idempotence checks off (Rules.LEGACY) or back to the configured rules."""

    kind: Literal["legacy-mode"]
    enabled: bool

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        return {"rules": str(broker.set_legacy_mode(self.enabled))}


class ForceRebalance(_Fault):
    """Put a group into PreparingRebalance, as a new member or a leader's rejoin would."""

    kind: Literal["force-rebalance"]
    group_id: str

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        return {"state": broker.groups.force_rebalance(self.group_id)}


class ExpireMember(_Fault):
    """End one member's session now (or every member's, without `member_id`), as if it had
    stopped heartbeating."""

    kind: Literal["expire-member"]
    group_id: str
    member_id: str | None = None

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        return {"expired": broker.groups.expire_members(self.group_id, self.member_id)}


COORDINATOR_ERRORS = (
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
)


class CoordinatorUnavailable(_Fault):
    """The next `count` group requests (FindCoordinator for a group included) find the
    coordinator unavailable: `error` where Kafka's coordinator would answer it, with Kafka's
    special cases (a loading coordinator answers Heartbeat blindly, SyncGroup with
    REBALANCE_IN_PROGRESS)."""

    kind: Literal["coordinator-unavailable"]
    count: int = Field(ge=1, le=1_000_000)
    error: ErrorCode = ErrorCode.coordinator_not_available

    @field_validator("error", mode="before")
    @classmethod
    def _coordinator_error(cls, value: Any) -> ErrorCode:
        error = parse_error(value)
        if error not in COORDINATOR_ERRORS:
            names = ", ".join(error_name(e) for e in COORDINATOR_ERRORS)
            raise ValueError(f"error must be one of {names}")
        return error

    def apply(self, broker: ReferenceBroker, server: KafkaProtocolServer) -> dict[str, object]:
        broker.unavailable_coordinator.arm(self.count, self.error)
        return {}


Fault = Annotated[
    ExpireProducers
    | RetainBatches
    | DropResponse
    | FailRequest
    | CrashRestart
    | LegacyMode
    | ForceRebalance
    | ExpireMember
    | CoordinatorUnavailable,
    Field(discriminator="kind"),
]
FAULT_ADAPTER: TypeAdapter[Fault] = TypeAdapter(Fault)


@dataclass
class _Pending:
    remaining: int
    fault: DropResponse | FailRequest


class RequestFaults:
    """The request-path faults still to be consumed, at most one of each kind per API."""

    def __init__(self) -> None:
        self._drops: dict[int, _Pending] = {}
        self._failures: dict[int, _Pending] = {}

    def arm(self, fault: _ApiFault) -> None:
        if isinstance(fault, DropResponse):
            self._drops[fault.api] = _Pending(fault.count, fault)
        elif isinstance(fault, FailRequest):
            self._failures[fault.api] = _Pending(fault.count, fault)

    def take_failure(self, api_key: int) -> ErrorCode | None:
        """The error to answer this request with, consuming one armed failure."""
        pending = self._take(self._failures, api_key)
        return pending.error if isinstance(pending, FailRequest) else None

    def take_drop(self, api_key: int) -> DropResponse | None:
        """The drop to apply to this request's response, consuming one armed drop."""
        pending = self._take(self._drops, api_key)
        return pending if isinstance(pending, DropResponse) else None

    def clear(self) -> None:
        self._drops.clear()
        self._failures.clear()

    def as_json(self) -> list[dict[str, object]]:
        return [
            {
                **p.fault.model_dump(mode="json"),
                "api": api_name(key),
                **(
                    {"error": error_name(p.fault.error)} if isinstance(p.fault, FailRequest) else {}
                ),
                "remaining": p.remaining,
            }
            for table in (self._drops, self._failures)
            for key, p in table.items()
        ]

    @staticmethod
    def _take(table: dict[int, _Pending], api_key: int) -> DropResponse | FailRequest | None:
        pending = table.get(api_key)
        if pending is None:
            return None
        pending.remaining -= 1
        if pending.remaining == 0:
            del table[api_key]
        return pending.fault

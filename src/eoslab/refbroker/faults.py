"""State faults the lab injects into the reference broker, and the log of when it did.

A fault is one JSON object posted to the control API. The request-path faults (lost
responses, failed requests, an unavailable coordinator) wait until the server consumes them;
the state faults (expiry, retained batches, crash-restart, legacy mode, a forced rebalance, an
expired group member) are applied by the broker at once.
Every application is written to the fault log as a JSON line with a wall-clock timestamp
so the run report can draw it on the timeline.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from eoslab.refbroker.protocol import api_key_from_name, api_name, error_code_from_name


class _Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpireProducers(_Fault):
    """Remove one producer's state (or everyone's) from every partition, whatever its age."""

    kind: Literal["expire-producers"]
    producer_id: int | None = None


class RetainBatches(_Fault):
    """Change how many batches per producer the duplicate cache keeps (Kafka: 5, fixed)."""

    kind: Literal["retained-batches"]
    count: int = Field(ge=1, le=1000)


class _ApiFault(_Fault):
    api: int
    count: int = Field(ge=1, le=1_000_000)

    @field_validator("api", mode="before")
    @classmethod
    def _api_key(cls, value: Any) -> int:
        return api_key_from_name(value)


class DropResponses(_ApiFault):
    """Apply the next `count` requests of `api` but never answer them: the lost ack."""

    kind: Literal["drop-responses"]
    close_connection: bool = True
    """Reset the connection after swallowing the response, as a broken network would."""


class FailRequests(_ApiFault):
    """Answer the next `count` requests of `api` with `error` without applying them."""

    kind: Literal["fail-requests"]
    error: ErrorCode

    @field_validator("error", mode="before")
    @classmethod
    def _error_code(cls, value: Any) -> ErrorCode:
        return error_code_from_name(value)


class CrashRestart(_Fault):
    """Drop all in-memory state and reopen the log from disk, like kill -9 and a restart."""

    kind: Literal["crash-restart"]


class LegacyMode(_Fault):
    """Switch the idempotence checks off (Rules.LEGACY) or back to the configured rules."""

    kind: Literal["legacy-mode"]
    enabled: bool


class ForceRebalance(_Fault):
    """Put a group into PreparingRebalance, as a new member or a leader's rejoin would."""

    kind: Literal["force-rebalance"]
    group_id: str


class ExpireMember(_Fault):
    """End one member's session now (or every member's, without `member_id`), as if it had
    stopped heartbeating."""

    kind: Literal["expire-member"]
    group_id: str
    member_id: str | None = None


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
        error = error_code_from_name(value)
        if error not in COORDINATOR_ERRORS:
            names = ", ".join(e.name.upper() for e in COORDINATOR_ERRORS)
            raise ValueError(f"error must be one of {names}")
        return error


Fault = Annotated[
    ExpireProducers
    | RetainBatches
    | DropResponses
    | FailRequests
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
    fault: DropResponses | FailRequests


class RequestFaults:
    """The request-path faults still to be consumed, at most one of each kind per API."""

    def __init__(self) -> None:
        self._drops: dict[int, _Pending] = {}
        self._failures: dict[int, _Pending] = {}

    def arm(self, fault: DropResponses | FailRequests) -> None:
        table = self._drops if isinstance(fault, DropResponses) else self._failures
        table[fault.api] = _Pending(fault.count, fault)

    def take_failure(self, api_key: int) -> ErrorCode | None:
        """The error to answer this request with, consuming one armed failure."""
        pending = self._take(self._failures, api_key)
        return pending.error if isinstance(pending, FailRequests) else None

    def take_drop(self, api_key: int) -> DropResponses | None:
        """The drop to apply to this request's response, consuming one armed drop."""
        pending = self._take(self._drops, api_key)
        return pending if isinstance(pending, DropResponses) else None

    def clear(self) -> None:
        self._drops.clear()
        self._failures.clear()

    def as_json(self) -> list[dict[str, object]]:
        return [
            {**p.fault.model_dump(mode="json"), "api": api_name(key), "remaining": p.remaining}
            for table in (self._drops, self._failures)
            for key, p in table.items()
        ]

    @staticmethod
    def _take(table: dict[int, _Pending], api_key: int) -> DropResponses | FailRequests | None:
        pending = table.get(api_key)
        if pending is None:
            return None
        pending.remaining -= 1
        if pending.remaining == 0:
            del table[api_key]
        return pending.fault


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class FaultLog:
    """Append-only JSON lines: what was applied, when (ms since the epoch), with what effect."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, event: str, **details: object) -> dict[str, object]:
        entry: dict[str, object] = {"ts_ms": wall_clock_ms(), "event": event, **details}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")
        return entry

    def entries(self) -> list[dict[str, object]]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as lines:
            return [json.loads(line) for line in lines if line.strip()]

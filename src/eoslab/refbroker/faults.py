"""State and request faults the lab injects into the reference broker, one model per kind, each
applying itself: a new fault kind touches this file only.

A fault is one JSON object posted to the control API. The request-path faults (lost
responses, failed requests, an unavailable group coordinator) wait until the server consumes
them; the state faults (expiry, retained batches, crash-restart, the rule set, a forced
rebalance, an expired group member) act at once. Every
application is written to the fault log with a wall-clock timestamp, so the run report can
draw it on the timeline. Kinds are spelt as the proxy's and the scenario steps' (kebab-case,
singular): ``drop-response`` is the lost ack wherever it is injected.

Each kind also says, from what the control API showed before and after (:class:`Snapshot`:
``GET /counters`` and ``GET /faults``) and from what applying it answered, whether it took
effect (:meth:`took_effect`): a request fault must have been consumed by a request, an expiry
must have removed a producer, a rule set must have judged a batch, a duplicate cache of
another size must have answered a retry otherwise than Kafka's 5-batch cache, a crash-restart
must have reloaded records from disk. Being applied is never enough. The nemesis asks it when
the fault ends.
"""

from __future__ import annotations

import abc
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Protocol

from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from eoslab.clock import now_ms
from eoslab.kafka_api import api_name, error_name, parse_api_key, parse_error
from eoslab.refbroker.producer_state import Rules

if TYPE_CHECKING:
    from eoslab.refbroker.groups.group_coordinator import GroupCoordinator, UnavailableCoordinator
    from eoslab.refbroker.log_manager import LogManager


class FaultedBroker(Protocol):
    """What a fault changes in the reference broker (:class:`eoslab.refbroker.broker.
    ReferenceBroker`): named here, so that this module never imports the broker that arms it."""

    request_faults: RequestFaults
    unavailable_coordinator: UnavailableCoordinator
    storage: LogManager
    groups: GroupCoordinator

    def set_rules(self, rules: Rules | None) -> Rules: ...

    def crash_restart(self) -> dict[str, int]: ...


class Connections(Protocol):
    """The server's client connections (:class:`eoslab.refbroker.server.KafkaProtocolServer`)."""

    def disconnect_all(self) -> int: ...


@dataclass(frozen=True)
class Snapshot:
    """The control API's ``/counters`` and ``/faults`` answers at one moment."""

    counters: dict[str, Any]
    state: dict[str, Any]


class _Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @abc.abstractmethod
    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        """Act on the broker now; returns what the fault did, for its log entry."""

    @abc.abstractmethod
    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        """Whether it did something observable (one line saying what, or why not): being
        applied is never enough."""


def produce_counter(snapshot: Snapshot, name: str) -> Any:
    """``/counters``' ``produce`` entry ``name`` at one moment."""
    return snapshot.counters.get("produce", {}).get(name, 0)


class ExpireProducers(_Fault):
    """Remove one producer's state (or everyone's) from every partition, whatever its age."""

    kind: Literal["expire-producers"]
    producer_id: int | None = None

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        removed = broker.storage.expire_producers(
            now_ms(), producer_id=self.producer_id, force=True
        )
        return {"removed": removed}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        removed = int(applied.get("removed", 0))
        if removed:
            return True, f"removed {removed} producer state entr{'y' if removed == 1 else 'ies'}"
        return False, "no producer state to remove"


class RetainBatches(_Fault):
    """Change how many batches per producer the duplicate cache keeps (Kafka: 5, fixed)."""

    kind: Literal["retained-batches"]
    count: int = Field(ge=1, le=1000)

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        broker.storage.set_retained_batches(self.count)
        return {}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        """A retry the cache answered otherwise than Kafka's 5-batch cache would have (a
        duplicate refused, or one answered from past Kafka's window): a cache of another size
        that never made a difference proves nothing."""
        differed = int(produce_counter(after, "cache_differs")) - int(
            produce_counter(before, "cache_differs")
        )
        if differed:
            return True, (
                f"duplicate cache of {self.count} batch(es): {differed} retr"
                f"{'y' if differed == 1 else 'ies'} answered otherwise than by Kafka's 5"
            )
        return False, (
            f"duplicate cache of {self.count} batch(es), but no retry was answered otherwise "
            "than by Kafka's 5"
        )


class _ApiFault(_Fault):
    api: int
    count: int = Field(ge=1, le=1_000_000)

    @field_validator("api", mode="before")
    @classmethod
    def _api_key(cls, value: Any) -> int:
        return parse_api_key(value)

    counter: ClassVar[str]
    """The ``/counters`` ``faults`` entry that counts what it did, per API."""
    verb: ClassVar[str]

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        broker.request_faults.arm(self)
        return {"api": api_name(self.api)}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        api = api_name(self.api)

        def done(snapshot: Snapshot) -> int:
            return int(snapshot.counters.get("faults", {}).get(self.counter, {}).get(api, 0))

        consumed = done(after) - done(before)
        if consumed:
            return True, f"{self.verb} {consumed} of {self.count} {api} request(s)"
        return False, f"armed for {self.count} {api} request(s), none came"


class DropResponse(_ApiFault):
    """Apply the next `count` requests of `api` but never answer them: the lost ack."""

    kind: Literal["drop-response"]
    counter: ClassVar[str] = "responses_dropped"
    verb: ClassVar[str] = "swallowed the responses to"
    reset: bool = True
    """Reset the connection after swallowing the response, as a broken network would."""


class LoseRequest(_ApiFault):
    """Lose the next `count` requests of `api` on their way in: neither applied nor answered,
    and the connection reset, so every request pipelined behind one is lost with it (a broker
    that died before reading them). The client sees a transport failure: possibly persisted,
    actually not."""

    kind: Literal["lose-request"]
    counter: ClassVar[str] = "requests_lost"
    verb: ClassVar[str] = "lost"


class FailRequest(_ApiFault):
    """Answer the next `count` requests of `api` with `error` without applying them."""

    kind: Literal["fail-request"]
    counter: ClassVar[str] = "requests_failed"
    verb: ClassVar[str] = "failed"
    error: ErrorCode

    @field_validator("error", mode="before")
    @classmethod
    def _error_code(cls, value: Any) -> ErrorCode:
        return parse_error(value)


class CrashRestart(_Fault):
    """Drop all in-memory state and reopen the log from disk, like kill -9 and a restart."""

    kind: Literal["crash-restart"]

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        dropped = server.disconnect_all()
        return {"connections_dropped": dropped, "reloaded": broker.crash_restart()}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        """The restarted broker reloaded records from disk: a restart of a broker holding
        nothing shows no recovery."""
        reloaded = applied.get("reloaded") or {}
        records = int(reloaded.get("records", 0))
        dropped = applied.get("connections_dropped", 0)
        line = (
            f"reloaded {records} record(s) of {reloaded.get('partitions', 0)} partition(s) and "
            f"{reloaded.get('producers', 0)} producer state entr"
            f"{'y' if reloaded.get('producers', 0) == 1 else 'ies'} from disk, "
            f"{dropped} connection(s) dropped"
        )
        return records > 0, line if records else f"nothing to reload: {line}"


class SetRules(_Fault):
    """Judge batches by another producer-state rule set from now on (``legacy``: no
    idempotence check at all, the negative controls; ``kafka-2.0``: before KIP-360); DELETE
    /faults goes back to the configured one."""

    kind: Literal["rules"]
    rules: Rules

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        return {"rules": str(broker.set_rules(self.rules))}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        """Batches were judged by the rule set while it was in force."""
        rules = str(self.rules)

        def judged(snapshot: Snapshot) -> int:
            return int((produce_counter(snapshot, "judged") or {}).get(rules, 0))

        count = judged(after) - judged(before)
        if count:
            return True, f"{count} batch(es) judged by the {rules} producer-state rules"
        return False, f"producer-state rules {rules} in force, but no batch was judged by them"


class ForceRebalance(_Fault):
    """Put a group into PreparingRebalance, as a new member or a leader's rejoin would."""

    kind: Literal["force-rebalance"]
    group_id: str

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        return {"state": broker.groups.force_rebalance(self.group_id)}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        state = applied.get("state")
        return state == "PreparingRebalance", f"group {self.group_id} is {state}"


class ExpireMember(_Fault):
    """End one member's session now (or every member's, without `member_id`), as if it had
    stopped heartbeating."""

    kind: Literal["expire-member"]
    group_id: str
    member_id: str | None = None

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        return {"expired": broker.groups.expire_members(self.group_id, self.member_id)}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        expired = applied.get("expired") or []
        count = len(expired) if isinstance(expired, list) else int(expired)
        return count > 0, f"expired {count} member(s) of group {self.group_id}"


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

    def apply(self, broker: FaultedBroker, server: Connections) -> dict[str, object]:
        broker.unavailable_coordinator.arm(self.count, self.error)
        return {}

    def took_effect(
        self, applied: dict[str, Any], before: Snapshot, after: Snapshot
    ) -> tuple[bool, str]:
        remaining = int(after.state.get("coordinator_unavailable", {}).get("remaining", 0))
        answered = self.count - remaining
        if answered:
            return True, f"answered {answered} group request(s) with {error_name(self.error)}"
        return False, "no group request came while the coordinator was unavailable"


Fault = Annotated[
    ExpireProducers
    | RetainBatches
    | DropResponse
    | LoseRequest
    | FailRequest
    | CrashRestart
    | SetRules
    | ForceRebalance
    | ExpireMember
    | CoordinatorUnavailable,
    Field(discriminator="kind"),
]
FAULT_ADAPTER: TypeAdapter[Fault] = TypeAdapter(Fault)


RequestFault = DropResponse | LoseRequest | FailRequest


@dataclass
class _Pending:
    remaining: int
    fault: RequestFault


class RequestFaults:
    """The request-path faults still to be consumed: per API, in the order they were armed
    (a lost request, then a failed one, is what the two requests after it meet)."""

    def __init__(self) -> None:
        self._queues: dict[int, deque[_Pending]] = {}

    def arm(self, fault: _ApiFault) -> None:
        if isinstance(fault, DropResponse | LoseRequest | FailRequest):
            self._queues.setdefault(fault.api, deque()).append(_Pending(fault.count, fault))

    def take(self, api_key: int) -> RequestFault | None:
        """The fault this request meets, consuming one of its count."""
        queue = self._queues.get(api_key)
        if not queue:
            return None
        pending = queue[0]
        pending.remaining -= 1
        if pending.remaining == 0:
            queue.popleft()
        return pending.fault

    def clear(self) -> None:
        self._queues.clear()

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
            for key, queue in self._queues.items()
            for p in queue
        ]

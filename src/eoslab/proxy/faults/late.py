"""Late delivery, Jepsen's delayed packet: capture a request and deliver a copy of it again
later, on a connection of the proxy's own to the same broker, whatever became of the client's
connection meanwhile. The broker's answer to the copy is read and kept in the evidence; the
client never sees it.

Captured: the next `count` (default 1) requests of `api` on the route; `forward: true` lets
the original through as well (the broker then sees it twice), `false` swallows it (the client
waits for an answer that never comes; `reset` closes its connection). Delivered `after_ms`
after the capture, or once the next request of `after_api` (an API, or a list: the first of
them) has been answered, then `after_ms` more: the next on any route to the same cluster (a
transaction's coordinator need not lead its partitions), never another cluster's: the lab's
proxy fronts the three targets at once, and in lanes a cell on another target sends requests
of its own (in `make conformance` another lane's Produce released kafka-17754's late EndTxn 6
and 24 ms after its capture, before the next transaction had begun). A list names the first
sign of what the copy waits for when clients give it differently: a transaction's start at its
coordinator is its AddPartitionsToTxn, or, with transaction version 2, which has none, its
first Produce (whose answer can come late: the leader waits for the coordinator first). A
copy still waiting when the fault is removed is not delivered.

Took effect when every copy it captured (and `count` of them) was delivered and answered:
the evidence says when each was captured, delivered and answered, and the answer's errors
(decoded with kio), e.g. the INVALID_TXN_STATE of a Produce that arrived after its
transaction was aborted (KAFKA-12671), or the answer to an EndTxn delivered late
(KAFKA-17754). Not when the broker put a copy off (:data:`PUT_OFF`: the coordinator was busy
and acted on nothing, as it tells a client to try again; a late EndTxn of `make conformance`,
2026-12-07, met the next transaction's commit under way): the copy came, but not late into
anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Self

from pydantic import Field, field_validator, model_validator

from eoslab.clock import now_ms
from eoslab.kafka_api import api_name, parse_api_key
from eoslab.proxy.faults.spec import (
    DecodedFaultSpec,
    Direction,
    FaultEvidence,
    FaultState,
    FrameContext,
    FrameVerdict,
    LateCopy,
)

MAX_COPIES = 100
PUT_OFF = frozenset(
    {
        "CONCURRENT_TRANSACTIONS",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
    }
)
"""Answers by which a coordinator declines a request for now, having done nothing with it."""
MAX_AFTER_MS = 600_000


@dataclass(slots=True)
class PendingCopy:
    """A captured request on its way to late delivery; ``evidence`` is what the tally shows."""

    fault_id: str
    evidence: LateCopy
    frame: bytes
    api_key: int
    api_version: int
    after_s: float
    """Delay before delivery, from the capture (or from the release when it waits)."""
    waits: bool
    """It waits for the next request of the fault's ``after_api`` to be answered."""
    trigger: tuple[str, int, int] | None = None
    """That request, once seen: (route, connection, correlation id)."""


class Courier(Protocol):
    """Who delivers the copies (the proxy's :class:`~eoslab.proxy.late_delivery.LateCourier`)."""

    def captured(self, copy: PendingCopy) -> None: ...

    def released(self, copy: PendingCopy) -> None: ...


@dataclass(slots=True)
class LateCopies:
    """One late fault's copies, and their courier (none in the pure-logic tests)."""

    copies: list[PendingCopy] = field(default_factory=list)
    courier: Courier | None = None

    def captured(self, copy: PendingCopy) -> None:
        self.copies.append(copy)
        if self.courier is not None:
            self.courier.captured(copy)

    def released(self, copy: PendingCopy) -> None:
        copy.evidence.released_ms = now_ms()
        if self.courier is not None:
            self.courier.released(copy)


class LateSpec(DecodedFaultSpec):
    kind: Literal["late"]
    forward: bool = Field(description="let the original through as well (the broker sees it twice)")
    count: int = Field(1, ge=1, le=MAX_COPIES, description="capture the next N matching requests")
    after_ms: int | None = Field(
        None, ge=0, le=MAX_AFTER_MS, description="deliver this long after the capture (or release)"
    )
    after_api: tuple[str, ...] | None = Field(
        None,
        description="deliver once the next request of this API, or of the first of these APIs,"
        " (any route to the same cluster) is answered",
    )
    reset: bool = Field(False, description="then reset the client's connection")

    @field_validator("after_api", mode="before")
    @classmethod
    def _known_after_api(cls, apis: object) -> tuple[str, ...] | None:
        if apis is None:
            return None
        listed: list[object] = list(apis) if isinstance(apis, list | tuple) else [apis]
        if not listed:
            raise ValueError("name at least one Kafka API")
        names = []
        for api in listed:
            if isinstance(api, bool) or not isinstance(api, str | int):
                raise ValueError("must be a Kafka API name or number, or a list of them")
            names.append(api_name(parse_api_key(api)))
        return tuple(names)

    @model_validator(mode="after")
    def _has_a_time(self) -> Self:
        if self.after_ms is None and self.after_api is None:
            raise ValueError("after_ms: say when to deliver (after_ms, after_api, or both)")
        return self

    def selected_direction(self) -> Direction:
        return Direction.REQUEST

    def new_state(self) -> LateCopies:
        return LateCopies()

    def state_evidence(self, state: LateCopies) -> dict[str, Any]:
        return {"late": [copy.evidence for copy in state.copies]}

    def watched_apis(self) -> frozenset[int]:
        return frozenset(parse_api_key(api) for api in self.after_api or ())

    def watch(self, fault: FaultState, frame: FrameContext) -> None:
        """The next request of (one of) ``after_api`` to the copy's cluster after a capture is
        noted; its answer releases."""
        if self.after_api is None or api_name(frame.api_key) not in self.after_api:
            return  # after_api holds api_name's names: no set built for every frame
        key = (frame.route, frame.connection, frame.correlation_id)
        copies: LateCopies = fault.state
        for copy in copies.copies:
            if copy.evidence.released_ms is not None:
                continue
            if cluster_of(frame.route) != cluster_of(copy.evidence.route):
                continue
            if frame.direction is Direction.REQUEST and copy.trigger is None:
                copy.trigger = key
            elif frame.direction is Direction.RESPONSE and copy.trigger == key:
                copies.released(copy)

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        copy = PendingCopy(
            fault.id,
            LateCopy(
                api=api_name(frame.api_key),
                route=frame.route,
                connection=frame.connection,
                correlation_id=frame.correlation_id,
                forwarded=self.forward,
                captured_ms=now_ms(),
            ),
            bytes(frame.data),
            frame.api_key,
            frame.api_version,
            (self.after_ms or 0) / 1000,
            waits=self.after_api is not None,
        )
        fault.state.captured(copy)
        verdict.hit(fault, frame, late="captured", forwarded=self.forward)
        verdict.drop = not self.forward
        verdict.reset = self.reset
        return verdict.drop or verdict.reset

    def took_effect(self, evidence: FaultEvidence) -> tuple[bool, str]:
        if not evidence.late:
            return super().took_effect(evidence)
        copies = evidence.late
        answered = [copy for copy in copies if copy.answer is not None]
        held = "forwarded too" if self.forward else "held back"
        line = f"captured {len(copies)} {self.api} request(s) ({held}), {len(answered)} delivered late and answered"
        for copy in copies:
            if copy.answer is None:
                return False, f"{line}; {self._why_not(copy)}"
        details = "; ".join(_delivery(copy) for copy in answered)
        if len(copies) < self.count:
            return False, f"{line}; {self.count - len(copies)} short of count {self.count}"
        if put_off := [c for c in answered if PUT_OFF & set((c.answer or {}).values())]:
            return False, (
                f"{line}: {details}; {len(put_off)} put off by the broker, which acted on "
                "nothing (it was busy: the copy landed late into nothing)"
            )
        return True, f"{line}: {details}"

    def _why_not(self, copy: LateCopy) -> str:
        if copy.failure is not None:
            return copy.failure
        if copy.delivered_ms is not None:
            return "delivered, not answered yet"
        if copy.released_ms is None and self.after_api is not None:
            return f"waiting for the next {' or '.join(self.after_api)} request to be answered"
        return "not delivered yet"


def cluster_of(route: str) -> str:
    """The cluster a route leads to: its name without the broker's number (``kafka4-2``:
    ``kafka4``; the reference broker's route is its own; a fronting proxy's ``broker-N``
    routes, ``broker``, all lead to the user's one cluster)."""
    return re.sub(r"-\d+$", "", route)


def _delivery(copy: LateCopy) -> str:
    """``delivered 5012 ms after capture, answered INVALID_TXN_STATE (t:0)``."""
    assert copy.delivered_ms is not None  # answered, so delivered
    assert copy.answer is not None
    errors = ", ".join(
        f"{error} ({label})" if label else error for label, error in copy.answer.items()
    )
    return f"delivered {copy.delivered_ms - copy.captured_ms} ms after capture, answered {errors or 'nothing'}"

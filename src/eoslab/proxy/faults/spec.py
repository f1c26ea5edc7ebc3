"""What every proxy fault is: where it acts (route, API, direction), when (count, probability,
window), what it does to a frame that triggers it (:meth:`FaultSpec.act`, one file per kind
beside this one), and how its evidence says whether it took effect.

Kinds are spelt as the reference broker's and the scenario steps' (kebab-case, singular):
``drop-response`` is the lost ack wherever it is injected. Scenario files embed these specs as
they are, so unknown fields are refused rather than silently ignored.

Where:  `route` (a broker name, or "*"), `api` (a Kafka API name or number, or "*") and, for
        the kinds that act on both directions, `direction`.
When:   `count` (the next N matching frames), `probability` (each matching frame, drawn from
        random.Random(seed) owned by the fault, so a frame sequence always gives the same
        injections), and a window: `start_ms`/`end_ms` after the fault is added, or
        `start_at_ms`/`end_at_ms` as wall-clock epoch milliseconds.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from eoslab.kafka_api import api_name, parse_api_key
from eoslab.proxy.faults.results import require_encodable

ANY = "*"
CONNECTION = "(connection)"
"""The "API" of an action on a whole connection (an immediate reset, a connection stalled by a
blackhole) in a fault's evidence."""


class Direction(StrEnum):
    REQUEST = "request"
    RESPONSE = "response"


class FaultSpecError(ValueError):
    """A fault spec that cannot be applied; the message names the offending field."""


@dataclass(slots=True)
class FrameContext:
    """What the proxy knows about a frame: where it goes and the request it belongs to.

    Built for every frame of a route with a fault in force, so not frozen: a frozen
    dataclass's ``__init__`` costs about four times as much. Nothing changes it."""

    route: str
    direction: Direction
    api_key: int
    api_version: int
    correlation_id: int
    size: int
    connection: int = 0
    buffer: bytes | memoryview = b""
    start: int = 0
    """Where the frame is: ``buffer[start:start + size]`` (kept apart, so that frames no kind
    reads cost no slice)."""

    @property
    def data(self) -> bytes | memoryview:
        """The whole frame, size prefix included (for the kinds that read or copy it)."""
        return self.buffer[self.start : self.start + self.size]


class FaultState(Protocol):
    """What a kind's ``act`` may use of the fault in force (an ``ActiveFault``): its own seeded
    generator, its bandwidth clock, its tally, the state of its own kind (``state``) and what
    its ``examine`` made of the frame it fires on (``examined``)."""

    id: str
    random: random.Random
    bandwidth_free_at: float
    state: Any
    examined: Any

    def noted(self, api_key: int | None, connection: int, delay_s: float = 0.0) -> None: ...

    def frame_entry(self, frame: FrameContext, delay_s: float = 0.0) -> dict[str, object]: ...


@dataclass(slots=True)
class FrameVerdict:
    """What to do with a frame that triggered at least one fault: built by the faults' ``act``
    in the order they were added."""

    now: float
    hits: list[tuple[FaultState, float]] = field(default_factory=list)
    drop: bool = False
    reset: bool = False
    hold: bool = False
    delay_s: float = 0.0
    deliver_at: float | None = None
    answer: bytes | None = None
    """A response the proxy gives the client in the (dropped) request's place."""
    replace: bytes | None = None
    """The frame to pass on instead of this one."""
    notes: dict[str, dict[str, object]] = field(default_factory=dict)
    """Fault id -> what its fault-log entry says beyond the frame."""

    def hit(
        self, fault: FaultState, frame: FrameContext, delay_s: float = 0.0, **notes: object
    ) -> None:
        """The fault acted on the frame (adding ``delay_s``): noted here and in its evidence."""
        self.hits.append((fault, delay_s))
        if notes:
            self.notes[fault.id] = notes
        fault.noted(frame.api_key, frame.connection, delay_s)

    def delay_until(self, moment: float) -> None:
        self.delay_s = moment - self.now
        self.deliver_at = moment


class LateCopy(BaseModel):
    """A request captured for late delivery: when, and the broker's answer to the copy."""

    model_config = ConfigDict(extra="forbid")

    api: str
    route: str
    connection: int
    correlation_id: int
    forwarded: bool
    """Whether the original went on to the broker as well (then the broker saw it twice)."""
    captured_ms: int
    released_ms: int | None = None
    """When it became due: its ``after_api`` request answered (else when captured)."""
    delivered_ms: int | None = None
    """When the copy went out, on a connection of its own."""
    answered_ms: int | None = None
    answer: dict[str, str] | None = None
    """The broker's answer: result (a partition "topic:0", "" for the whole response) -> error."""
    failure: str | None = None
    """Why it was not delivered or not answered."""


class FaultEvidence(BaseModel):
    """What the proxy saw one fault do, as the control API lists it: frames matched and acted
    on, per API and connection, and the delay it added."""

    model_config = ConfigDict(extra="forbid")

    matched: int = 0
    """Frames (or connections) it selected inside its window."""
    injected: int = 0
    """Frames (or connections) it acted on."""
    frames: dict[str, dict[str, int]] = Field(default_factory=dict)
    """API name (or CONNECTION) -> connection id -> frames acted on."""
    delay_ms: float = 0.0
    """The delay it added, summed over its frames."""
    first_ms: int | None = None
    last_ms: int | None = None
    """Wall-clock times of its first and last action."""
    results: dict[str, dict[str, int]] = Field(default_factory=dict)
    """API name -> result (a partition "topic:1", a group, "" for a whole response) -> times
    it carried an injected error (the `error` kind)."""
    errors: dict[str, int] = Field(default_factory=dict)
    """Error name injected -> results that carried it."""
    replaced: dict[str, int] = Field(default_factory=dict)
    """Error name the broker had answered -> results rewritten (``NONE``: the write happened)."""
    unencodable: dict[str, int] = Field(default_factory=dict)
    """``"Produce v14"`` -> selected frames passed on untouched: the proxy cannot encode them."""
    late: list[LateCopy] = Field(default_factory=list)
    """Every request copy captured for late delivery, and what became of it (the `late` kind)."""

    @property
    def connections(self) -> int:
        return len({c for per_api in self.frames.values() for c in per_api})

    def apis(self) -> str:
        """``3 Produce, 1 Metadata``: what it acted on, most first."""
        totals = {api: sum(per.values()) for api, per in self.frames.items()}
        return ", ".join(f"{n} {api}" for api, n in sorted(totals.items(), key=lambda i: -i[1]))


class FaultSpec(BaseModel, abc.ABC):
    """A fault of one kind (every concrete spec narrows ``kind`` to a literal)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    route: str = Field(ANY, description='broker name as given to the proxy (--route), or "*"')
    start_ms: int | None = Field(
        None, ge=0, description="window start, ms after the fault is added"
    )
    end_ms: int | None = Field(None, gt=0, description="window end, ms after the fault is added")
    start_at_ms: int | None = Field(None, ge=0, description="window start, epoch ms")
    end_at_ms: int | None = Field(None, gt=0, description="window end, epoch ms")

    verb: ClassVar[str] = "acted on"
    """What the fault does to a frame, in its evidence's one-line summary."""

    @field_validator("route")
    @classmethod
    def _known_route(cls, route: str, info: ValidationInfo) -> str:
        routes: Collection[str] | None = (info.context or {}).get("routes")
        if route != ANY and routes is not None and route not in routes:
            known = ", ".join(sorted(routes)) or "none"
            raise ValueError(f"unknown route {route!r} (routes: {known}, or '*')")
        return route

    @model_validator(mode="after")
    def _coherent_window(self) -> Self:
        relative = self.start_ms is not None or self.end_ms is not None
        absolute = self.start_at_ms is not None or self.end_at_ms is not None
        if relative and absolute:
            raise ValueError(
                "start_at_ms: give a relative (start_ms/end_ms) or an absolute window, not both"
            )
        for start, end, problem in (
            (self.start_ms, self.end_ms, "end_ms: must be after start_ms"),
            (self.start_at_ms, self.end_at_ms, "end_at_ms: must be after start_at_ms"),
        ):
            if start is not None and end is not None and end <= start:
                raise ValueError(problem)
        return self

    # ------------------------------------------------------------------ selection
    def selected_api(self) -> int | None:
        """The API key of the frames it acts on, None for any."""
        return None

    def selected_direction(self) -> Direction | None:
        """The direction of the frames it acts on, None for both."""
        return None

    def trigger(self) -> tuple[int | None, float | None, int | None]:
        """(count, probability, own seed): which matching frames fire, None where unset."""
        return None, None, None

    def per_frame(self) -> bool:
        """False for a fault acting on whole connections at once (an immediate reset)."""
        return True

    def new_state(self) -> object:
        """The state of this kind kept with the fault in force (``FaultState.state``)."""
        return None

    def state_evidence(self, state: Any) -> dict[str, Any]:
        """The evidence fields this kind's state adds to the tally."""
        return {}

    def examines(self) -> bool:
        """Whether it selects frames by their content as well (``examine``)."""
        return False

    def examine(self, fault: FaultState, frame: FrameContext) -> object:
        """What the frame, already selected by route, API and direction, means to this kind;
        None: not selected after all (it does not count as matched, nor against ``count``).
        The fault's ``act`` finds it in ``fault.examined``."""
        return frame

    def watched_apis(self) -> frozenset[int]:
        """The API keys of frames it watches on every route besides those it acts on
        (``watch``); none: it watches nothing."""
        return frozenset()

    def watch(self, fault: FaultState, frame: FrameContext) -> None:
        """See a frame of its ``watched_apis`` on any route (before any fault acts on it)."""

    # ------------------------------------------------------------------ behaviour
    @abc.abstractmethod
    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        """Act on a frame that triggered the fault (``verdict.hit`` it); True when no later
        fault may see the frame (it is dropped, or its connection reset)."""

    def took_effect(self, evidence: FaultEvidence) -> tuple[bool, str]:
        """Whether the fault did anything, and the one line that says what (or why not)."""
        if evidence.injected == 0:
            seen = (
                f"{evidence.matched} matching frame(s) seen"
                if evidence.matched
                else "no matching traffic"
            )
            return False, f"{self.kind} never fired ({seen})"
        detail = f"{self.verb} {evidence.apis()} on {evidence.connections} connection(s)"
        if evidence.delay_ms:
            detail += f", {evidence.delay_ms:.0f} ms added in all"
        return True, detail


class FrameFaultSpec(FaultSpec):
    """A fault decided frame by frame."""

    api: str = Field(ANY, description='Kafka API name ("Produce") or number, or "*"')
    count: int | None = Field(None, ge=1, description="act on the next N matching frames only")
    probability: float | None = Field(None, ge=0.0, le=1.0, description="chance per frame")
    seed: int | None = Field(None, description="seed of the fault's own random generator")

    @field_validator("api", mode="before")
    @classmethod
    def _known_api(cls, api: object) -> str:
        if api == ANY:
            return ANY
        if isinstance(api, bool) or not isinstance(api, str | int):
            raise ValueError("must be a Kafka API name, an API key number, or '*'")
        return api_name(parse_api_key(api))

    def selected_api(self) -> int | None:
        return None if self.api == ANY else parse_api_key(self.api)

    def trigger(self) -> tuple[int | None, float | None, int | None]:
        return self.count, self.probability, self.seed


class DecodedFaultSpec(FrameFaultSpec):
    """A fault on the requests of one API, whose messages the proxy decodes (with kio)."""

    api: str = Field(description="the Kafka API (name or number) whose requests it acts on")

    @field_validator("api")
    @classmethod
    def _encodable_api(cls, api: str) -> str:
        return require_encodable(api)


class DirectedFaultSpec(FrameFaultSpec):
    direction: Direction | None = Field(None, description="request, response, or both if unset")

    def selected_direction(self) -> Direction | None:
        return self.direction

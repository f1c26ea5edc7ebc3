"""Fault specifications: what the chaos proxy breaks, where, and when.

Kinds are spelt as the reference broker's and the scenario steps' (kebab-case, singular):
``drop-response`` is the lost ack wherever it is injected.

One pydantic model per fault kind, told apart by `kind`. Scenario files embed these specs
as they are, so unknown fields are refused rather than silently ignored.

Where:  `route` (a broker name, or "*"), `api` (a Kafka API name or number, or "*") and, for
        the kinds that act on both directions, `direction`.
When:   `count` (the next N matching frames), `probability` (each matching frame, drawn from
        random.Random(seed) owned by the fault, so a frame sequence always gives the same
        injections), and a window: `start_ms`/`end_ms` after the fault is added, or
        `start_at_ms`/`end_at_ms` as wall-clock epoch milliseconds.
"""

from collections.abc import Collection
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from eoslab.kafka_api import api_name, parse_api_key

ANY = "*"


class Direction(StrEnum):
    REQUEST = "request"
    RESPONSE = "response"


class FaultSpecError(ValueError):
    """A fault spec that cannot be applied; the message names the offending field."""


class _FaultSpecBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    route: str = Field(ANY, description='broker name as given to the proxy (--route), or "*"')
    start_ms: int | None = Field(
        None, ge=0, description="window start, ms after the fault is added"
    )
    end_ms: int | None = Field(None, gt=0, description="window end, ms after the fault is added")
    start_at_ms: int | None = Field(None, ge=0, description="window start, epoch ms")
    end_at_ms: int | None = Field(None, gt=0, description="window end, epoch ms")

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


class _FrameFaultSpec(_FaultSpecBase):
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

    @property
    def api_key(self) -> int | None:
        """The API key selected, None for any."""
        return None if self.api == ANY else parse_api_key(self.api)


class _DirectedFaultSpec(_FrameFaultSpec):
    direction: Direction | None = Field(None, description="request, response, or both if unset")


class DropRequestSpec(_FrameFaultSpec):
    """Swallow the request: the broker never sees it."""

    kind: Literal["drop-request"]
    reset: bool = Field(False, description="then reset the connection")


class DropResponseSpec(_FrameFaultSpec):
    """Forward the request, swallow its response: a lost ack.

    librdkafka only retries after a request timeout or a disconnect, hence `reset`.
    """

    kind: Literal["drop-response"]
    reset: bool = Field(False, description="then reset the connection")


class DelaySpec(_DirectedFaultSpec):
    kind: Literal["delay"]
    ms: float = Field(ge=0)


class LatencySpec(_DirectedFaultSpec):
    """A delay drawn uniformly from mean ± jitter (never below zero)."""

    kind: Literal["latency"]
    mean_ms: float = Field(ge=0)
    jitter_ms: float = Field(0.0, ge=0)


class BandwidthSpec(_DirectedFaultSpec):
    """At most `bytes_per_s` through the matching frames, summed over the route's connections."""

    kind: Literal["bandwidth"]
    bytes_per_s: int = Field(gt=0)


class ResetSpec(_DirectedFaultSpec):
    """Close both sides of a connection on a matching frame, or of every current one now."""

    kind: Literal["reset"]
    immediate: bool = Field(False, description="reset the route's current connections at once")

    @model_validator(mode="after")
    def _immediate_has_no_frame_trigger(self) -> Self:
        frame_fields = ("count", "probability", "direction", "start_ms", "start_at_ms")
        if self.immediate and self.api != ANY:
            raise ValueError("api: an immediate reset takes no api selector")
        for name in frame_fields:
            if self.immediate and getattr(self, name) is not None:
                raise ValueError(f"{name}: an immediate reset takes no frame trigger")
        return self


class BlackholeSpec(_FaultSpecBase):
    """A network partition: connections are accepted but nothing passes either way."""

    kind: Literal["blackhole"]


FaultSpec = Annotated[
    DropRequestSpec
    | DropResponseSpec
    | DelaySpec
    | LatencySpec
    | BandwidthSpec
    | ResetSpec
    | BlackholeSpec,
    Field(discriminator="kind"),
]
FAULT_KINDS = (
    "drop-request",
    "drop-response",
    "delay",
    "latency",
    "bandwidth",
    "reset",
    "blackhole",
)
FAULT_SPEC_ADAPTER: TypeAdapter[FaultSpec] = TypeAdapter(FaultSpec)


def parse_fault_spec(data: Any, routes: Collection[str] | None = None) -> FaultSpec:
    """Validate a fault spec (a dict, e.g. parsed JSON or YAML) against the proxy's routes.

    Raises FaultSpecError with one line per problem, each naming its field.
    """
    try:
        return FAULT_SPEC_ADAPTER.validate_python(data, context={"routes": routes})
    except ValidationError as error:
        raise FaultSpecError(describe_validation_error(error)) from None


def describe_validation_error(error: ValidationError) -> str:
    """One "field: problem" line per error, without pydantic's union-tag noise."""
    lines = []
    for detail in error.errors(include_url=False):
        location = [str(part) for part in detail["loc"]]
        if location and location[0] in FAULT_KINDS:
            location = location[1:]
        if detail["type"] in {"union_tag_invalid", "union_tag_not_found"}:
            location = ["kind"]
            message = f"must be one of {', '.join(FAULT_KINDS)}"
            given = detail["input"].get("kind") if isinstance(detail["input"], dict) else None
            if given is not None:
                message = f"unknown fault kind {given!r}; {message}"
        else:
            message = detail["msg"].removeprefix("Value error, ")
        lines.append(f"{'.'.join(location)}: {message}" if location else message)
    return "\n".join(lines)

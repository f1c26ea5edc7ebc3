"""Answer a request with a Kafka error code of our choosing: `reject` answers it in the
broker's place (the broker never sees it), `rewrite` forwards it and puts the error into the
broker's response (the write happened, the client is told it did not). The error-code
injection librdkafka's mock cluster and franz-go's kfake are built around, on a real broker.

Selected by API (one the proxy can encode: :mod:`results`), route, the proxy's connection id,
and for APIs with per-partition results by `partition`: a rewrite sets only that partition's
error; a reject answers every partition of the requests that carry it (none was forwarded).
A request whose answer has no place for the error (a Metadata request for every topic, a
Produce without that partition, acks=0) is not selected. Frames of a version the proxy cannot
encode pass untouched, counted in the evidence's ``unencodable``.

Took effect when it acted on ``count`` frames (at least one without a count).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from kio.schema.errors import ErrorCode
from pydantic import Field, field_validator, model_validator

from eoslab.kafka_api import api_name, error_name, parse_api_key, parse_error
from eoslab.proxy.faults.results import (
    Encoded,
    Result,
    UnencodableError,
    encodable_apis,
    error_response,
    partitioned,
    rewritten_response,
)
from eoslab.proxy.faults.spec import (
    DecodedFaultSpec,
    Direction,
    FaultEvidence,
    FaultState,
    FrameContext,
    FrameVerdict,
)

SHOWN_RESULTS = 5
"""Results named in the one-line evidence; the rest are counted."""


@dataclass(slots=True)
class ErrorTally:
    """What the error fault put where: results per API, the errors it replaced, the frames
    it could not encode."""

    results: dict[str, Counter[str]] = field(default_factory=dict)
    replaced: Counter[str] = field(default_factory=Counter)
    unencodable: Counter[str] = field(default_factory=Counter)

    def injected(self, api_key: int, touched: Sequence[Result]) -> None:
        per_api = self.results.setdefault(api_name(api_key), Counter())
        for result in touched:
            per_api[result.label] += 1
            if result.before is not None:
                self.replaced[result.before] += 1


class ErrorSpec(DecodedFaultSpec):
    kind: Literal["error"]
    error: str = Field(description="a Kafka error name (or code): OUT_OF_ORDER_SEQUENCE_NUMBER")
    mode: Literal["reject", "rewrite"] = Field(
        description="reject: answer in the broker's place; rewrite: forward, then rewrite the "
        "broker's answer"
    )
    partition: int | None = Field(
        None, ge=0, description="only results of this partition (APIs with per-partition results)"
    )
    connection: int | None = Field(
        None, ge=1, description="only this connection of the proxy's (ids as in its fault log)"
    )

    @field_validator("error", mode="before")
    @classmethod
    def _known_error(cls, error: object) -> str:
        if isinstance(error, bool) or not isinstance(error, str | int):
            raise ValueError("must be a Kafka error name or code")
        code = parse_error(error)
        if code is ErrorCode.none:
            raise ValueError("NONE is no error: name the one to inject")
        return error_name(code)

    @model_validator(mode="after")
    def _partition_has_results(self) -> Self:
        if self.partition is not None and not partitioned(parse_api_key(self.api)):
            known = ", ".join(api_name(key) for key in encodable_apis() if partitioned(key))
            raise ValueError(
                f"partition: {self.api} has no per-partition results (these have: {known})"
            )
        return self

    @property
    def code(self) -> ErrorCode:
        return parse_error(self.error)

    def selected_direction(self) -> Direction:
        return Direction.REQUEST if self.mode == "reject" else Direction.RESPONSE

    def new_state(self) -> ErrorTally:
        return ErrorTally()

    def state_evidence(self, state: ErrorTally) -> dict[str, Any]:
        touched = sum(per_api.total() for per_api in state.results.values())
        return {
            "results": {api: dict(per) for api, per in state.results.items()},
            "errors": {self.error: touched} if touched else {},
            "replaced": dict(state.replaced),
            "unencodable": dict(state.unencodable),
        }

    def examines(self) -> bool:
        return True

    def examine(self, fault: FaultState, frame: FrameContext) -> Encoded | None:
        """The frame the proxy sends instead, None if it does not select this one."""
        if self.connection is not None and frame.connection != self.connection:
            return None
        try:
            if self.mode == "reject":
                return error_response(frame.data, self.code, self.partition)
            return rewritten_response(
                frame.data, frame.api_key, frame.api_version, self.code, self.partition
            )
        except UnencodableError:
            fault.state.unencodable[f"{api_name(frame.api_key)} v{frame.api_version}"] += 1
            return None

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        encoded: Encoded = fault.examined
        fault.state.injected(frame.api_key, encoded.results)
        verdict.hit(
            fault,
            frame,
            error=self.error,
            mode=self.mode,
            results=[result.label for result in encoded.results],
        )
        if self.mode == "rewrite":
            verdict.replace = encoded.frame
            return False
        verdict.answer = encoded.frame
        verdict.drop = True
        return True

    def took_effect(self, evidence: FaultEvidence) -> tuple[bool, str]:
        untouched = (
            "; passed on untouched, versions it cannot encode: "
            + ", ".join(f"{n} {version}" for version, n in evidence.unencodable.items())
            if evidence.unencodable
            else ""
        )
        if evidence.injected == 0:
            _, line = super().took_effect(evidence)
            return False, line + untouched
        verb = "answered" if self.mode == "reject" else "rewrote the responses to"
        line = (
            f"{verb} {evidence.apis()} request(s) on {evidence.connections} connection(s): "
            f"{self._results(evidence)}{untouched}"
        )
        if self.count is not None and evidence.injected < self.count:
            short = self.count - evidence.injected
            return False, f"acted {evidence.injected} of {self.count} times ({short} short): {line}"
        return True, line

    def _results(self, evidence: FaultEvidence) -> str:
        """``3 results now NOT_ENOUGH_REPLICAS (t:0 x2, t:1; were NONE x3)``."""
        labels = Counter[str]()
        for per_api in evidence.results.values():
            labels.update(per_api)
        named = [
            f"{label or 'the response'}" + (f" x{n}" if n > 1 else "")
            for label, n in labels.most_common(SHOWN_RESULTS)
        ]
        if len(labels) > SHOWN_RESULTS:
            named.append(f"{len(labels) - SHOWN_RESULTS} more")
        line = f"{labels.total()} result(s) now {self.error} ({', '.join(named)}"
        if evidence.replaced:
            line += "; were " + ", ".join(f"{name} x{n}" for name, n in evidence.replaced.items())
        return line + ")"

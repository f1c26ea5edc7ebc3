"""What a probe said and heard: one :class:`Exchange` per request, in the order they were sent."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

NONE = "NONE"
"""The error name of a success (Kafka's error code 0)."""


@dataclass
class Exchange:
    """One request and its answer. ``ack_lost``: the probe read the answer and then acted as
    if it had never arrived. ``error`` stays None while (or if never) answered."""

    step: int
    """Index of the flow step that sent it (-1: before the flow, e.g. InitProducerId)."""
    api: str
    sent_ms: int
    tag: str | None = None
    producer_id: int | None = None
    epoch: int | None = None
    base_sequence: int | None = None
    record_count: int = 0
    error: str | None = None
    base_offset: int | None = None
    answered_ms: int | None = None
    ack_lost: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.answered_ms is not None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def flow_run_json(run: object) -> dict[str, Any]:
    """A played flow (a dataclass with a ``flow``, ``exchanges`` and plain fields) as JSON: the
    flow by its name, every exchange as :meth:`Exchange.as_json`, the other fields as they are."""
    out: dict[str, Any] = {}
    for spec in fields(run):  # type: ignore[arg-type]
        value = getattr(run, spec.name)
        if spec.name == "flow":
            flow: _Named = value
            value = flow.name
        elif spec.name == "exchanges":
            value = [exchange.as_json() for exchange in value]
        out[spec.name] = value
    return out

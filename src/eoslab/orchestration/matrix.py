"""The scenario matrix: which scenarios run against which targets, and with how many records.

The default matrix is small enough for `make lab` on two cores: the baseline, one fault the
idempotent producer must survive (lost acks) and one negative control (no idempotence), each
on both targets. The full matrix is every catalogue scenario on every target it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from eoslab.scenarios.catalogue import catalogue, load_scenario

TARGETS = ("kafka", "refbroker")
DEFAULT_SCENARIOS = ("baseline", "lost-acks", "no-idempotence")
DEFAULT_RECORDS = 1500
MATRICES = ("default", "full")


class MatrixError(ValueError):
    """A matrix request naming an unknown matrix, scenario or target."""


@dataclass(frozen=True)
class Cell:
    """One scenario on one target; ``records`` None keeps the scenario's own count."""

    scenario: str
    target: str
    records: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def plan(request: Mapping[str, Any]) -> list[Cell]:
    """The cells of a matrix request (a DAG run's conf): ``matrix`` "default" or "full", or
    explicit ``scenarios``; optional ``targets`` to narrow them and ``records`` per cell (the
    default matrix uses :data:`DEFAULT_RECORDS` unless told otherwise)."""
    matrix = request.get("matrix", "default")
    if matrix not in MATRICES:
        raise MatrixError(f"unknown matrix {matrix!r}; choose one of {', '.join(MATRICES)}")
    known = catalogue()
    scenarios = request.get("scenarios") or (
        DEFAULT_SCENARIOS if matrix == "default" else tuple(known)
    )
    unknown = sorted(set(scenarios) - known.keys())
    if unknown:
        raise MatrixError(f"unknown scenario(s) {unknown}; the catalogue has {', '.join(known)}")
    targets = request.get("targets") or TARGETS
    if not set(targets) <= set(TARGETS):
        raise MatrixError(f"targets must be among {TARGETS}, not {targets}")
    default_records = DEFAULT_RECORDS if matrix == "default" else None
    records = request.get("records", default_records)
    return [
        Cell(name, target, records)
        for name in scenarios
        for target in targets
        if target in load_scenario(known[name]).targets
    ]

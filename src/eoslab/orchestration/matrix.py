"""The scenario matrix: which scenarios run against which targets, in which consumer handler
modes, and with how many records.

The default matrix is small enough for `make lab` on two cores and covers both halves on every
target (:data:`DEFAULT_CELLS`): on each target one fault the idempotent producer must survive
(lost acks) and the consumer half's crash between an effect and its commit, and on Kafka 3.9
each half's negative control: no idempotence (duplicates) and commit-after (a doubled effect).
Kafka 4's consumer cell uses KIP-848's group protocol, the reference broker's and Kafka 4's
consumers a PROCESSED_MESSAGE table (dedup-table), so no effect may double there; and lost acks
once on Kafka's Java client (Kafka 4) and once on franz-go (Kafka 3.9). The full matrix is every
catalogue scenario on every target it names, each consumer scenario in every mode it names, on
the workload's own librdkafka and on every client of :data:`MATRIX_CLIENTS` where it applies
(the consumer half on :data:`CONSUMER_CLIENTS`; a scenario about one client's behaviour or played
by the probe says ``every_client: false``), each scenario that names other clients once per
client, and a few producer scenarios paired with consumers (:data:`END_TO_END`: exactly-once from
the producer to the sink). The sample matrix is every :data:`SAMPLE_STRIDE` th cell of the full
one on each target, in the full one's order (each target's share of the cells kept): what `make
bench` measures the lanes against one lane on, where the whole matrix twice would take a day's
machine. A request's ``clients`` narrows any matrix to those clients (``librdkafka`` is the
workload's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from eoslab.clients import MATRIX_FRANZ_GO, MATRIX_JAVA, ClientError, parse_client
from eoslab.rundir import (
    HANDLER_MODES,
    LAB_TARGETS,
    GroupProtocol,
    HandlerMode,
    cell_name,
)
from eoslab.scenarios.catalogue import catalogue, load_scenario

END_TO_END: dict[str, tuple[HandlerMode, ...]] = {
    "baseline": ("dedup-table",),
    "lost-acks": ("dedup-table",),
    "leader-kill": ("idempotent",),
}
"""Producer scenarios the full matrix also runs with consumers, in these modes."""
JAVA = str(MATRIX_JAVA)
FRANZ_GO = str(MATRIX_FRANZ_GO)
MATRIX_CLIENTS: tuple[str, ...] = (JAVA, FRANZ_GO)
"""Clients the full matrix runs every scenario's roles on, beside the workload's librdkafka."""
CONSUMER_CLIENTS: tuple[str, ...] = (JAVA,)
"""Of those, the ones the full matrix runs the consumer half on (group consumers, sinks)."""
OWN_CLIENT = "librdkafka"
"""How a request's ``clients`` names the workload's own librdkafka."""
DEFAULT_RECORDS = 1500
MATRICES = ("default", "full", "sample")
SAMPLE_STRIDE = 15
"""The sample matrix takes every 15th cell of the full one on each target (452 cells: 31)."""


class MatrixError(ValueError):
    """A matrix request naming an unknown matrix, scenario or target."""


@dataclass(frozen=True)
class Cell:
    """One scenario on one target; ``records`` None keeps the scenario's own count."""

    scenario: str
    target: str
    records: int | None = None
    mode: HandlerMode | None = None
    """The consumers' handler mode; None: producers only."""
    client: str | None = None
    """The client the roles run (``java:3.9.2``); None: the workload's own librdkafka."""
    group_protocol: GroupProtocol = "classic"
    """The consumers' group protocol (``consumer``: KIP-848, Kafka 4 only)."""

    @property
    def name(self) -> str:
        """The cell's scenario as run ids and reports name it (:func:`cell_name`)."""
        return cell_name(self.scenario, self.mode, self.client, self.group_protocol)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_CELLS: tuple[Cell, ...] = (
    Cell("lost-acks", "kafka"),
    Cell("no-idempotence", "kafka"),
    Cell("consumer-crash-before-commit", "kafka", mode="commit-after"),
    Cell("lost-acks", "kafka4"),
    Cell("consumer-crash-before-commit", "kafka4", mode="dedup-table", group_protocol="consumer"),
    Cell("lost-acks", "refbroker"),
    Cell("consumer-crash-before-commit", "refbroker", mode="dedup-table"),
    Cell("lost-acks", "kafka4", client=JAVA),
    Cell("lost-acks", "kafka", client=FRANZ_GO),
)
"""The default matrix, its records set by the request."""


def plan(request: Mapping[str, Any]) -> list[Cell]:
    """The cells of a matrix request (a DAG run's conf): ``matrix`` "default", "full" or "sample", or
    explicit ``scenarios``; optional ``targets`` to narrow them, ``modes`` to run every chosen
    scenario with consumers in those handler modes instead of its own, and ``records`` per cell
    (the default matrix uses :data:`DEFAULT_RECORDS` unless told otherwise), ``clients`` to
    keep only the cells of these clients (``librdkafka``: the workload's own; a family keeps
    every release of it; in the full matrix, these clients instead of :data:`MATRIX_CLIENTS`).
    A scenario that names other clients gets a cell per client too (not with ``modes``); a
    cell with consumers on Kafka 4 runs once per group protocol (classic and KIP-848's)."""
    matrix = request.get("matrix", "default")
    if matrix not in MATRICES:
        raise MatrixError(f"unknown matrix {matrix!r}; choose one of {', '.join(MATRICES)}")
    if matrix == "sample":
        full = plan({**request, "matrix": "full"})
        return [
            cell
            for target in LAB_TARGETS
            for cell in [c for c in full if c.target == target][::SAMPLE_STRIDE]
        ]
    known = catalogue()
    explicit = request.get("scenarios") or []
    scenarios = explicit or (
        tuple(dict.fromkeys(cell.scenario for cell in DEFAULT_CELLS))
        if matrix == "default"
        else tuple(known)
    )
    unknown = sorted(set(scenarios) - known.keys())
    if unknown:
        raise MatrixError(f"unknown scenario(s) {unknown}; the catalogue has {', '.join(known)}")
    targets = request.get("targets") or LAB_TARGETS
    if not set(targets) <= set(LAB_TARGETS):
        raise MatrixError(f"targets must be among {LAB_TARGETS}, not {targets}")
    modes = request.get("modes") or []
    if not set(modes) <= set(HANDLER_MODES):
        raise MatrixError(f"modes must be among {HANDLER_MODES}, not {modes}")
    default_records = DEFAULT_RECORDS if matrix == "default" else None
    records = request.get("records", default_records)
    wanted = _clients(request.get("clients") or [])
    if matrix == "default" and not explicit and not modes:
        return [
            replace(cell, records=records)
            for cell in DEFAULT_CELLS
            if cell.target in targets and _among(cell.client, wanted)
        ]
    extra = [c for c in wanted if c != OWN_CLIENT] if wanted else list(MATRIX_CLIENTS)
    cells = []
    for name in scenarios:
        scenario = load_scenario(known[name])
        runs: list[HandlerMode | None] = list(modes) or scenario.run_modes
        if matrix == "full" and not modes:
            runs += END_TO_END.get(name, ())
        named: list[str | None] = [None, *([] if modes else scenario.clients)]
        for mode in runs:
            clients = list(named)
            if matrix == "full" and scenario.every_client:
                clients += [
                    c for c in extra if c not in clients and (mode is None or c in CONSUMER_CLIENTS)
                ]
            cells += [
                Cell(name, target, records, mode, client, protocol)
                for target in targets
                if target in scenario.targets
                for client in clients
                if _among(client, wanted)
                for protocol in scenario.group_protocols(target, mode)
            ]
    return cells


def _clients(names: list[str]) -> list[str]:
    """A request's clients, canonical (``librdkafka`` and bare families kept as they are)."""
    try:
        return [
            name if name in (OWN_CLIENT, "java", "franz-go") else str(parse_client(name))
            for name in names
        ]
    except ClientError as error:
        raise MatrixError(str(error)) from None


def _among(client: str | None, wanted: list[str]) -> bool:
    """Whether a cell's client is among the request's (every client when none are named)."""
    if not wanted:
        return True
    if client is None:
        return OWN_CLIENT in wanted
    return client in wanted or parse_client(client).family in wanted

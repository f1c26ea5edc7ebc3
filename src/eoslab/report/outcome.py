"""One run as a report sees it: what ran, and whether it conforms, read from its run directory.

A run whose checker left no verdict is still reported, as an error with the reason, so a
matrix never silently drops a cell.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from eoslab.rundir import (
    CONSUMER_ANOMALIES,
    COPY_ANOMALIES,
    TRANSACTION_ANOMALIES,
    Check,
    RunDir,
    RunDirError,
    cell_name,
)

HALVES: tuple[tuple[str, str], ...] = (
    ("producer", "Producer half: producers → broker"),
    ("consumer", "Consumer half: broker → consumers → sink"),
    ("transactions", "Transactions: commits and aborts → the reader under test"),
)
"""The sections a run's checks are shown in: (name, title)."""


def half_of(check: str) -> str:
    """The section of :data:`HALVES` a check belongs to (errors and fatal errors: the
    producer half's)."""
    if check in CONSUMER_ANOMALIES:
        return "consumer"
    if check in TRANSACTION_ANOMALIES or check in COPY_ANOMALIES:
        return "transactions"
    return "producer"


class Status(StrEnum):
    """A cell in a report: a verdict's status (:class:`~eoslab.rundir.VerdictStatus`), or an
    error when the checker left no verdict."""

    CONFORMS = "conforms"
    DOES_NOT_CONFORM = "does not conform"
    INVALID = "invalid"
    ERROR = "error"


NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class RunOutcome:
    """A run's identity, verdict and figures (empty figures when the checker did not finish)."""

    run_id: str
    scenario: str
    target: str
    run_dir: str
    status: Status
    mode: str | None = None
    """The consumer workload's handler mode; None when the run had none."""
    client: str | None = None
    """The client the roles ran when not the workload's own librdkafka (``java:3.9.2``)."""
    group_protocol: str = "classic"
    """The consumers' group protocol (``consumer``: KIP-848)."""
    librdkafka: str | None = None
    client_version: str | None = None
    """What the roles ran, ``<family>:<version>`` (None: a run from before it was recorded)."""
    broker_version: str | None = None
    """What the target ran (run.json); None: not recorded."""
    faults: list[dict[str, Any]] = field(default_factory=list)
    """Every step of the timeline, judged (FaultEffect): did it take effect, and the evidence."""
    invalid: list[str] = field(default_factory=list)
    """Why the run is invalid (empty unless it is)."""
    started_ms: int | None = None
    ended_ms: int | None = None
    checked_ms: int | None = None
    """When the checker wrote the verdict: the cell's work ends there, not with the workload."""
    checks: list[dict[str, Any]] = field(default_factory=list)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    gx: dict[str, Any] = field(default_factory=dict)
    naive: dict[str, Any] | None = None
    """The naive checker beside Spark (``compared``, ``differences``); None: not run."""
    data_docs: str | None = None
    error: str | None = None

    @property
    def duration_s(self) -> float | None:
        if self.started_ms is None or self.ended_ms is None:
            return None
        return (self.ended_ms - self.started_ms) / 1000

    @property
    def label(self) -> str:
        """The scenario, with the consumers' handler mode when the run had consumers."""
        return cell_name(self.scenario, self.mode, self.client, self.group_protocol)

    @property
    def client_ran(self) -> str:
        """The client the roles ran, as the report names it (``java:3.9.2``)."""
        if self.client_version is not None:
            return self.client_version
        return f"librdkafka:{self.librdkafka}" if self.librdkafka else NOT_RECORDED

    @property
    def cell(self) -> tuple[str, str]:
        """(scenario with its mode, target): a matrix row and column."""
        return (self.label, self.target)

    def checks_of(self, half: str) -> list[dict[str, Any]]:
        """The checks of one of the run's :data:`HALVES`."""
        return [c for c in self.checks if half_of(c["name"]) == half]

    def mismatch_message(self) -> str:
        """One line per mismatching check: what was expected, what was seen (for an invalid
        run: why it is invalid)."""
        if self.status is Status.ERROR:
            return self.error or "no verdict"
        if self.status is Status.INVALID:
            return "invalid: " + "; ".join(self.invalid)
        return "; ".join(Check.model_validate(m).summary for m in self.mismatches)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "duration_s": self.duration_s}


def load_outcome(run_dir: Path) -> RunOutcome:
    """Read run.json and, when present, the checker's verdict.json and metrics.json."""
    run = RunDir(run_dir)
    try:
        info = run.read_info()
    except (OSError, RunDirError) as error:
        return RunOutcome(
            run_id=run.run_id,
            scenario="?",
            target="?",
            run_dir=str(run.path),
            status=Status.ERROR,
            error=str(error),
        )
    identity: dict[str, Any] = {
        "run_id": info.run_id,
        "scenario": info.scenario,
        "target": info.target,
        "run_dir": str(run.path),
        "mode": None if info.consumption is None else info.consumption.mode,
        "client": info.client,
        "group_protocol": "classic"
        if info.consumption is None
        else info.consumption.group_protocol,
        "librdkafka": info.librdkafka,
        "client_version": info.client_version,
        "broker_version": info.broker_version,
        "faults": [fault.model_dump() for fault in info.faults],
        "started_ms": info.started_ms,
        "ended_ms": info.ended_ms,
    }
    if not run.verdict_json.is_file():
        return RunOutcome(
            **identity,
            status=Status.ERROR,
            error=f"the checker left no verdict ({run.verdict_json} is missing)",
        )
    try:
        verdict = run.read_verdict()
    except RunDirError as error:
        return RunOutcome(**identity, status=Status.ERROR, error=str(error))
    metrics = json.loads(run.metrics_json.read_text()) if run.metrics_json.is_file() else {}
    return RunOutcome(
        **identity,
        status=Status(verdict.status.value),
        invalid=verdict.invalid,
        checked_ms=verdict.checked_ms,
        checks=[check.model_dump() for check in verdict.checks],
        mismatches=[check.model_dump() for check in verdict.mismatches],
        metrics=metrics,
        gx=verdict.gx.model_dump(),
        naive=None if verdict.naive is None else verdict.naive.model_dump(),
        data_docs=verdict.links.data_docs,
    )


def latest_per_cell(outcomes: list[RunOutcome]) -> list[RunOutcome]:
    """One outcome per scenario x target: the last started (a retried cell ran twice)."""
    latest: dict[tuple[str, str], RunOutcome] = {}
    for outcome in sorted(outcomes, key=lambda o: (o.started_ms or 0, o.run_id)):
        latest[outcome.cell] = outcome
    return sorted(latest.values(), key=lambda o: o.cell)

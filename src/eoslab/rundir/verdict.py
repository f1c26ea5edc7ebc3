"""verdict.json: every check, expected against observed (Verdict).

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from eoslab.fault_events import FaultEffect


class Check(BaseModel):
    """One check of a verdict: an observed count against its expectation, with a few rows."""

    name: str
    expected: str
    observed: int
    conforms: bool
    examples: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def summary(self) -> str:
        """The check in one line, as every report and log prints it."""
        return f"{self.name}: expected {self.expected}, observed {self.observed}"


class ExpectationOutcome(BaseModel):
    """One GX expectation's result, and whether it agrees with the anomaly tables it stands
    for (it must succeed exactly when they are empty)."""

    suite: str
    type: str
    check: str
    success: bool
    unexpected: int | None
    anomalies: list[str]
    agrees: bool


class SuiteOutcome(BaseModel):
    version: int
    success: bool


class GxOutcome(BaseModel):
    """What the Great Expectations suites said about the run."""

    success: bool
    agrees_with_anomalies: bool
    suites: dict[str, SuiteOutcome]
    expectations: list[ExpectationOutcome]
    data_docs: str | None


CHECKER_DISAGREES = "checker_disagrees"
"""Why a verdict is invalid when the checker disagrees with itself (a checker bug: no cell may
be green on it)."""


class NaiveAgreement(BaseModel):
    """The naive checker run beside Spark on the same run (:mod:`eoslab.verify.naive`, from the
    copies of the topics the check kept): every count both computed, and each that differs
    (Spark's count, then the naive checker's)."""

    compared: list[str]
    differences: dict[str, list[int]] = Field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return not self.differences


class VerdictLinks(BaseModel):
    anomalies: dict[str, str]
    metrics: str
    data_docs: str | None


class VerdictStatus(StrEnum):
    """A run's verdict. **invalid** before anything else: a fault that did not take effect (or a
    run that did not go as its scenario says) proves nothing, whatever the checks observed."""

    CONFORMS = "conforms"
    DOES_NOT_CONFORM = "does not conform"
    INVALID = "invalid"

    @property
    def exit_code(self) -> int:
        """What a command that judged runs exits with: 0 conforms, 2 does not conform, 3
        invalid (1 stays for a command that could not do its work)."""
        return EXIT_CODES[self]


EXIT_CODES = {
    VerdictStatus.CONFORMS: 0,
    VerdictStatus.DOES_NOT_CONFORM: 2,
    VerdictStatus.INVALID: 3,
}


class Verdict(BaseModel):
    """``checker/verdict.json``: every check, expected against observed, and every fault, judged.
    A run **conforms** when every fault took effect and every check matches, including runs
    expected to show an anomaly (the negative controls); it is **invalid** when a fault did not
    take effect or the run went wrong (``invalid`` says why); ``mismatches`` repeats the failing
    checks so that a reader sees them first."""

    run_id: str
    scenario: str
    target: str
    status: VerdictStatus
    conforms: bool
    """``status == conforms``."""
    invalid: list[str] = Field(default_factory=list)
    faults: list[FaultEffect] = Field(default_factory=list)
    checked_ms: int
    """When the checker wrote the verdict: a run's work ends there, not with its workload."""
    checks: list[Check]
    mismatches: list[Check]
    gx: GxOutcome
    naive: NaiveAgreement | None = None
    """The naive checker beside Spark; None when it did not run (a run too large for it)."""
    links: VerdictLinks

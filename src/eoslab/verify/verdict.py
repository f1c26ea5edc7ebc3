"""The verdict: each check's observed count against the scenario's expectation.

A run **conforms** when every fault of its timeline took effect and every check matches,
including runs expected to show an anomaly (the negative controls); it is **invalid** when a
fault did not take effect or the run went wrong, whatever the checks observed. Expectations are strings: ``"0"`` (none), ``">0"`` (at least one),
``">=0"`` or ``"any"`` (counted, never a mismatch). Anomalies a scenario does not mention are
expected at ``"0"``, except ``indeterminate`` (allowed, counted) and ``foreign`` (reported).
Errors the run is expected to provoke (``expected["errors"]``, librdkafka error names) are
checked against the history's error counts (or the reference broker's count of Produce answers
with that error, whichever is more), as checks named ``errors.<NAME>``; fatal client
errors (``expected["fatal"]``) against the producer sessions that ended on them, as
``fatal.<NAME>``, and every run checks ``fatal.unexpected`` (sessions that ended on a fatal
error the scenario does not name) at "0"; ``epoch_bumps`` counts the producers' epoch bumps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from eoslab.clock import now_ms
from eoslab.rundir import (
    CHECKER_DISAGREES,
    EPOCH_BUMPS,
    ERRORS_KEY,
    EXPECTATION_FORMS,
    EXPECTATION_PATTERN,
    FATAL_KEY,
    HANGING_TRANSACTIONS,
    UNEXPECTED_FATAL,
    Check,
    GxOutcome,
    NaiveAgreement,
    RunInfo,
    Verdict,
    VerdictLinks,
    VerdictStatus,
    default_expectations,
)

MAX_EXAMPLES = 5


class ExpectationError(ValueError):
    """A scenario's expectation that is not one of :data:`EXPECTATION_FORMS`, or names no check."""


def matches(expectation: str, observed: int) -> bool:
    """Whether an observed count satisfies an expectation string (:data:`EXPECTATION_FORMS`)."""
    if not re.match(EXPECTATION_PATTERN, expectation):
        raise ExpectationError(f"expectation {expectation!r} is not one of {EXPECTATION_FORMS}")
    if expectation in (">=0", "any"):
        return True
    if expectation.startswith(">"):
        return observed > int(expectation[1:])
    return observed == int(expectation)


def expected_checks(
    expected: Mapping[str, str | Mapping[str, str]],
    consumed: bool = False,
    transactional: bool = False,
    copied: bool = False,
) -> dict[str, str]:
    """Every check's expectation: the defaults (the consumer half's too when a consumer workload
    ran, the transactions' when the producers were transactional, the copy's when a copier ran)
    overlaid with the scenario's,
    errors flattened to ``errors.<NAME>``. Raises :class:`ExpectationError` on an unknown name or
    form, before any work is done."""
    checks = {
        **default_expectations(consumed, transactional, copied),
        UNEXPECTED_FATAL: "0",
        EPOCH_BUMPS: ">=0",
        **({HANGING_TRANSACTIONS: "0"} if transactional else {}),
    }
    for name, expectation in expected.items():
        if name in (ERRORS_KEY, FATAL_KEY) and isinstance(expectation, Mapping):
            pairs = [(f"{name}.{error}", form) for error, form in expectation.items()]
        elif name in checks and isinstance(expectation, str):
            pairs = [(name, expectation)]
        else:
            known = ", ".join((*checks, ERRORS_KEY, FATAL_KEY))
            raise ExpectationError(f"unknown check {name!r} in expected; known: {known}")
        for check, form in pairs:
            if not re.match(EXPECTATION_PATTERN, form):
                raise ExpectationError(
                    f"{check}: expectation {form!r} is not one of {EXPECTATION_FORMS}"
                )
            checks[check] = form
    return checks


def errors_observed(history: Mapping[str, int], broker: Mapping[str, int]) -> dict[str, int]:
    """The ``errors.*`` checks' counts: records the history saw end on an error, or Produce
    answers the reference broker gave with it, whichever is more (a client that retried past
    an error leaves no trace of it in the history)."""
    names = set(history) | set(broker)
    return {
        f"{ERRORS_KEY}.{name}": max(history.get(name, 0), broker.get(name, 0)) for name in names
    }


def fatal_observed(fatal: Mapping[str, int], expected: Mapping[str, str]) -> dict[str, int]:
    """The ``fatal.*`` checks' counts: sessions per named fatal error, the rest unexpected."""
    observed = {UNEXPECTED_FATAL: 0}
    for name, sessions in fatal.items():
        check = f"{FATAL_KEY}.{name}"
        if check in expected:
            observed[check] = sessions
        else:
            observed[UNEXPECTED_FATAL] += sessions
    return observed


def judge(
    expected: Mapping[str, str],
    observed: Mapping[str, int],
    examples: Mapping[str, list[dict[str, Any]]],
) -> list[Check]:
    """One :class:`Check` per expected check (see :func:`expected_checks`); a check nobody
    observed counts 0 (an error name the history never reported, say)."""
    checks = []
    for name, expectation in expected.items():
        count = observed.get(name, 0)
        checks.append(
            Check(
                name=name,
                expected=expectation,
                observed=count,
                conforms=matches(expectation, count),
                examples=list(examples.get(name, []))[:MAX_EXAMPLES],
            )
        )
    return checks


def status_of(invalid: list[str], mismatches: list[Check]) -> VerdictStatus:
    """Invalid before anything else (a fault that did not take effect proves nothing), then
    whether every check matched."""
    if invalid:
        return VerdictStatus.INVALID
    return VerdictStatus.DOES_NOT_CONFORM if mismatches else VerdictStatus.CONFORMS


def checker_disagreements(gx: GxOutcome, naive: NaiveAgreement | None) -> list[str]:
    """Where the checker disagrees with itself: a GX expectation that does not agree with the
    anomaly tables it stands for, a count the naive checker computes differently."""
    reasons = []
    if not gx.agrees_with_anomalies:
        checks = sorted({e.check for e in gx.expectations if not e.agrees})
        reasons.append(
            f"{CHECKER_DISAGREES}: GX and the anomaly tables disagree on {', '.join(checks)}"
        )
    if naive is not None:
        reasons += [
            f"{CHECKER_DISAGREES}: {name} is {spark} by Spark and {counted} by the naive checker"
            for name, (spark, counted) in sorted(naive.differences.items())
        ]
    return reasons


def build_verdict(
    info: RunInfo,
    *,
    checks: list[Check],
    gx: GxOutcome,
    links: VerdictLinks,
    naive: NaiveAgreement | None = None,
) -> Verdict:
    """The run conforms when every fault of its timeline took effect and every check matches;
    it is invalid when a fault did not take effect or the run went wrong (run.json's
    ``faults`` and ``problems``), or when the checker disagrees with itself (GX with the anomaly
    tables, the naive checker with Spark: a checker bug, on which no cell may be green). The
    mismatches are repeated (with their examples) at the top so that a reader sees first what
    went wrong."""
    mismatches = [check for check in checks if not check.conforms]
    invalid = [*info.invalid_because(), *checker_disagreements(gx, naive)]
    status = status_of(invalid, mismatches)
    return Verdict(
        run_id=info.run_id,
        scenario=info.scenario,
        target=info.target,
        status=status,
        conforms=status is VerdictStatus.CONFORMS,
        invalid=invalid,
        faults=info.faults,
        checked_ms=now_ms(),
        checks=checks,
        mismatches=mismatches,
        gx=gx,
        naive=naive,
        links=links,
    )

"""The verdict: each check's observed count against the scenario's expectation.

A run **conforms** when every check matches, including runs expected to show an anomaly (the
negative controls). Expectations are strings: ``"0"`` (none), ``">0"`` (at least one),
``">=0"`` or ``"any"`` (counted, never a mismatch). Anomalies a scenario does not mention are
expected at ``"0"``, except ``indeterminate`` (allowed, counted) and ``foreign`` (reported).
Errors the run is expected to provoke (``expected["errors"]``, librdkafka error names) are
checked against the history's error counts, as checks named ``errors.<NAME>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eoslab.clock import now_ms
from eoslab.rundir import (
    ERRORS_KEY,
    EXPECTATION_FORMS,
    Check,
    GxOutcome,
    Verdict,
    VerdictLinks,
    default_expectations,
)

MAX_EXAMPLES = 5


class ExpectationError(ValueError):
    """A scenario's expectation that is not one of :data:`EXPECTATION_FORMS`, or names no check."""


def matches(expectation: str, observed: int) -> bool:
    """Whether an observed count satisfies an expectation string."""
    if expectation == "0":
        return observed == 0
    if expectation == ">0":
        return observed > 0
    if expectation in (">=0", "any"):
        return True
    raise ExpectationError(f"expectation {expectation!r} is not one of {EXPECTATION_FORMS}")


def expected_checks(
    expected: Mapping[str, str | Mapping[str, str]], consumed: bool = False
) -> dict[str, str]:
    """Every check's expectation: the defaults (the consumer half's too when a consumer workload
    ran) overlaid with the scenario's, errors flattened to ``errors.<NAME>``. Raises
    :class:`ExpectationError` on an unknown name or form, before any work is done."""
    checks = default_expectations(consumed)
    for name, expectation in expected.items():
        if name == ERRORS_KEY and isinstance(expectation, Mapping):
            pairs = [(f"{ERRORS_KEY}.{error}", form) for error, form in expectation.items()]
        elif name in checks and isinstance(expectation, str):
            pairs = [(name, expectation)]
        else:
            known = ", ".join((*checks, ERRORS_KEY))
            raise ExpectationError(f"unknown check {name!r} in expected; known: {known}")
        for check, form in pairs:
            if form not in EXPECTATION_FORMS:
                raise ExpectationError(
                    f"{check}: expectation {form!r} is not one of {EXPECTATION_FORMS}"
                )
            checks[check] = form
    return checks


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


def build_verdict(
    *,
    run_id: str,
    scenario: str,
    target: str,
    checks: list[Check],
    gx: GxOutcome,
    links: VerdictLinks,
) -> Verdict:
    """The run conforms when every check does; the mismatches are repeated (with their
    examples) at the top so that a reader sees first what went wrong."""
    mismatches = [check for check in checks if not check.conforms]
    return Verdict(
        run_id=run_id,
        scenario=scenario,
        target=target,
        conforms=not mismatches,
        checked_ms=now_ms(),
        checks=checks,
        mismatches=mismatches,
        gx=gx,
        links=links,
    )

"""Judging observed counts against a scenario's expectations (pure logic)."""

from __future__ import annotations

import pytest

from eoslab.fault_events import FaultEffect
from eoslab.rundir import (
    ExpectationOutcome,
    GxOutcome,
    NaiveAgreement,
    RunInfo,
    VerdictLinks,
    VerdictStatus,
)
from eoslab.verify.verdict import (
    ExpectationError,
    build_verdict,
    errors_observed,
    expected_checks,
    fatal_observed,
    judge,
    matches,
)

NO_GX = GxOutcome(
    success=True, agrees_with_anomalies=True, suites={}, expectations=[], data_docs=None
)
NO_LINKS = VerdictLinks(anomalies={}, metrics="metrics.json", data_docs=None)
INFO = RunInfo(
    run_id="r",
    scenario="s",
    target="kafka",
    bootstrap="127.0.0.1:1",
    topic="t",
    partitions=1,
    seed=0,
    started_ms=0,
)


def _effect(took_effect: bool) -> FaultEffect:
    return FaultEffect(
        step=0,
        kind="kill",
        target="kafka-1",
        took_effect=took_effect,
        evidence="pid 7 killed (SIGKILL)"
        if took_effect
        else "skipped: the workload finished first",
    )


def test_a_fault_without_effect_makes_the_run_invalid_whatever_the_checks_say() -> None:
    """A green cell promises the fault happened: a step that never fired (or did nothing)
    makes the run invalid, never "conforms"; so do the run's own problems."""
    clean = judge(expected_checks({}), {}, {})
    dirty = judge(expected_checks({}), {"lost": 2}, {})
    took = INFO.model_copy(update={"faults": [_effect(True)]})
    missed = INFO.model_copy(update={"faults": [_effect(False)]})
    troubled = INFO.model_copy(update={"problems": ["the run did not finish within 120 s"]})

    assert build_verdict(took, checks=clean, gx=NO_GX, links=NO_LINKS).status == "conforms"
    assert build_verdict(took, checks=dirty, gx=NO_GX, links=NO_LINKS).status == (
        "does not conform"
    )
    for info, reason in (
        (missed, "step 0 (kill kafka-1): skipped: the workload finished first"),
        (troubled, "the run did not finish within 120 s"),
    ):
        for checks in (clean, dirty):
            verdict = build_verdict(info, checks=checks, gx=NO_GX, links=NO_LINKS)
            assert verdict.status is VerdictStatus.INVALID
            assert not verdict.conforms
            assert verdict.invalid == [reason]
            assert verdict.status.exit_code == 3


def test_a_checker_that_disagrees_with_itself_makes_the_run_invalid() -> None:
    """A GX expectation that does not agree with its anomaly table, or a count the naive checker
    makes differently from Spark, is a checker bug: invalid, never green, however the checks
    came out."""
    clean = judge(expected_checks({}), {}, {})
    blind = ExpectationOutcome(
        suite="producer_exactly_once",
        type="expect_column_values_to_be_unique",
        check="duplicate",
        success=True,
        unexpected=0,
        anomalies=["duplicate"],
        agrees=False,
    )
    gx = NO_GX.model_copy(update={"agrees_with_anomalies": False, "expectations": [blind]})
    verdict = build_verdict(INFO, checks=clean, gx=gx, links=NO_LINKS)
    assert verdict.status is VerdictStatus.INVALID
    assert verdict.invalid == ["checker_disagrees: GX and the anomaly tables disagree on duplicate"]
    naive = NaiveAgreement(compared=["lost", "duplicate"], differences={"lost": [0, 2]})
    verdict = build_verdict(INFO, checks=clean, gx=NO_GX, links=NO_LINKS, naive=naive)
    assert verdict.status is VerdictStatus.INVALID
    assert verdict.invalid == ["checker_disagrees: lost is 0 by Spark and 2 by the naive checker"]
    agreeing = NaiveAgreement(compared=["lost", "duplicate"])
    verdict = build_verdict(INFO, checks=clean, gx=NO_GX, links=NO_LINKS, naive=agreeing)
    assert verdict.status is VerdictStatus.CONFORMS
    assert verdict.naive is not None
    assert verdict.naive.agrees


@pytest.mark.parametrize(
    ("expectation", "observed", "conforms"),
    [
        ("0", 0, True),
        ("0", 1, False),
        (">0", 0, False),
        (">0", 3, True),
        (">=0", 0, True),
        (">=0", 7, True),
        ("any", 0, True),
        ("any", 7, True),
        ("1", 1, True),
        ("1", 2, False),
        (">1", 1, False),
        (">1", 3, True),
    ],
)
def test_matches(expectation: str, observed: int, conforms: bool) -> None:
    assert matches(expectation, observed) is conforms


def test_unmentioned_anomalies_are_expected_absent_except_indeterminate_and_foreign() -> None:
    checks = expected_checks({"duplicate": ">0", "errors": {"OUT_OF_ORDER_SEQUENCE_NUMBER": ">0"}})

    assert checks["duplicate"] == ">0"
    assert checks["lost"] == "0"
    assert checks["key_gap"] == "0"
    assert checks["indeterminate"] == ">=0"
    assert checks["foreign"] == "any"
    assert checks["errors.OUT_OF_ORDER_SEQUENCE_NUMBER"] == ">0"


@pytest.mark.parametrize(
    ("expected", "message"),
    [
        ({"duplicates": "0"}, "unknown check 'duplicates'"),
        ({"lost": "<1"}, "lost: expectation '<1'"),
        ({"errors": {"X": "some"}}, "errors.X: expectation 'some'"),
        ({"errors": ">0"}, "unknown check 'errors'"),
    ],
)
def test_bad_expectations_are_refused_before_any_work(
    expected: dict[str, object], message: str
) -> None:
    with pytest.raises(ExpectationError, match=message):
        expected_checks(expected)  # type: ignore[arg-type]


def test_a_negative_control_conforms_because_its_anomaly_was_found() -> None:
    expected = expected_checks({"duplicate": ">0"})
    example = {"partition": 0, "offset": 3, "seq": 2}
    found = judge(expected, {"duplicate": 1}, {"duplicate": [example]})
    clean = judge(expected, {}, {})

    found_verdict = build_verdict(INFO, checks=found, gx=NO_GX, links=NO_LINKS)
    clean_verdict = build_verdict(INFO, checks=clean, gx=NO_GX, links=NO_LINKS)

    assert found_verdict.conforms
    assert not clean_verdict.conforms
    assert [(m.name, m.observed) for m in clean_verdict.mismatches] == [("duplicate", 0)]


def test_mismatches_carry_at_most_five_examples() -> None:
    examples = [{"partition": 0, "offset": offset, "seq": offset} for offset in range(9)]
    checks = judge(expected_checks({}), {"lost": 9}, {"lost": examples})

    verdict = build_verdict(INFO, checks=checks, gx=NO_GX, links=NO_LINKS)

    assert not verdict.conforms
    (mismatch,) = verdict.mismatches
    assert mismatch.name == "lost"
    assert mismatch.examples == examples[:5]
    assert verdict.model_dump()["mismatches"][0]["examples"][4]["offset"] == 4


def test_fatal_errors_are_checked_by_name_and_an_unnamed_one_is_a_mismatch() -> None:
    expected = expected_checks({"fatal": {"OUT_OF_ORDER_SEQUENCE_NUMBER": ">0"}})
    assert expected["fatal.OUT_OF_ORDER_SEQUENCE_NUMBER"] == ">0"
    assert expected["fatal.unexpected"] == "0"
    named = fatal_observed({"OUT_OF_ORDER_SEQUENCE_NUMBER": 1}, expected)
    assert named == {"fatal.unexpected": 0, "fatal.OUT_OF_ORDER_SEQUENCE_NUMBER": 1}
    assert all(c.conforms for c in judge(expected, named, {}))
    surprise = fatal_observed({"UNKNOWN_PRODUCER_ID": 2}, expected_checks({}))
    (mismatch,) = [c for c in judge(expected_checks({}), surprise, {}) if not c.conforms]
    assert mismatch.summary == "fatal.unexpected: expected 0, observed 2"


def test_errors_the_broker_answered_count_where_the_history_saw_none() -> None:
    observed = errors_observed(
        {"_MSG_TIMED_OUT": 3}, {"UNKNOWN_PRODUCER_ID": 2, "_MSG_TIMED_OUT": 1}
    )
    assert observed == {"errors._MSG_TIMED_OUT": 3, "errors.UNKNOWN_PRODUCER_ID": 2}

"""The versioned GX suite files of `expectations/`: they load, and broken ones are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eoslab.rundir import ANOMALIES
from eoslab.verify.suites import SUITE_NAMES, SuiteFile, SuiteFileError, load_suites


def test_repository_suites_load_versioned_and_cover_every_anomaly() -> None:
    suites = load_suites()

    assert [s.name for s in suites] == list(SUITE_NAMES)
    assert all(s.version >= 1 for s in suites)
    covered = {a for s in suites for e in s.expectations for a in e["meta"]["anomalies"]}
    assert covered == set(ANOMALIES) - {"indeterminate"}  # allowed, so no expectation
    for suite in suites:
        assert len(suite.to_gx().expectations) == len(suite.expectations)


def test_exactly_once_uses_the_built_in_compound_uniqueness() -> None:
    (exactly_once, _) = load_suites()

    assert {
        "type": "expect_compound_columns_to_be_unique",
        "kwargs": {"column_list": ["session_id", "partition", "seq"]},
    }.items() <= exactly_once.expectations[0].items()


def write_suite(directory: Path, name: str, content: dict[str, object]) -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"name": "exactly_once", "expectations": []}, "version"),
        ({"name": "other", "version": 1, "expectations": []}, "names suite 'other'"),
        ({"name": "exactly_once", "version": "one", "expectations": []}, "invalid literal"),
    ],
)
def test_broken_suite_files_are_refused(
    tmp_path: Path, content: dict[str, object], message: str
) -> None:
    with pytest.raises(SuiteFileError, match=message):
        SuiteFile.load(write_suite(tmp_path, "exactly_once", content))


@pytest.mark.parametrize(
    ("expectation", "message"),
    [
        ({"type": "expect_column_values_to_not_be_null", "kwargs": {}}, "column"),
        ({"type": "expect_nothing_at_all", "kwargs": {}}, "accepted 0 of 1"),
    ],
)
def test_an_expectation_gx_rejects_is_refused(
    tmp_path: Path, expectation: dict[str, object], message: str
) -> None:
    suite = SuiteFile.load(
        write_suite(
            tmp_path,
            "exactly_once",
            {
                "name": "exactly_once",
                "version": 2,
                "expectations": [expectation],
            },
        )
    )

    with pytest.raises(SuiteFileError, match=message):
        suite.to_gx()

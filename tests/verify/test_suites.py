"""The versioned GX suite files of `expectations/`: they load, and broken ones are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eoslab.rundir import PRODUCER_ANOMALIES
from eoslab.verify.history import read_history
from eoslab.verify.ledger import build_ledger, by_key, run_rows
from eoslab.verify.suites import SUITE_NAMES, SuiteFile, SuiteFileError, load_suites


def test_repository_suites_load_versioned_and_cover_every_anomaly() -> None:
    suites = load_suites()

    assert [s.name for s in suites] == list(SUITE_NAMES)
    assert all(s.version >= 1 for s in suites)
    covered = {a for s in suites for e in s.expectations for a in e["meta"]["anomalies"]}
    assert covered == set(PRODUCER_ANOMALIES) - {"indeterminate"}  # allowed, so no expectation
    for suite in suites:
        assert len(suite.to_gx().expectations) == len(suite.expectations)


def test_every_suite_query_runs_on_its_asset_without_a_shuffle(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The suites' windows are partitioned as their asset is clustered: over the checker's
    cached frames, no query plans an exchange of its own (at 8M records each one costs
    seconds)."""
    classified = spark.createDataFrame(
        [("s1", 0, 0, 0, 0, "k0", 0, None, None), ("s1", 0, 1, 1, 1, "k0", 1, None, None)],
        "session_id string, producer int, partition int, offset bigint, seq bigint, "
        "key string, key_seq bigint, reason string, value_head string",
    )
    ledger = build_ledger(classified, read_history(spark, tmp_path)).persist()
    key_ledger = by_key(ledger).persist()
    frames = {"ledger": run_rows(ledger), "key_ledger": key_ledger}
    try:
        for suite in load_suites():
            frames[suite.asset].createOrReplaceTempView("asset")
            for expectation in suite.expectations:
                query = expectation["kwargs"].get("unexpected_rows_query")
                if query is None:
                    continue
                frame = spark.sql(query.replace("{batch}", "asset"))
                assert frame.count() == 0
                plan = frame._jdf.queryExecution().executedPlan().toString()
                own_operators = plan.split("InMemoryTableScan")[0]
                assert "Exchange" not in own_operators, (suite.name, plan)
    finally:
        ledger.unpersist()
        key_ledger.unpersist()


def write_suite(directory: Path, name: str, content: dict[str, object]) -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"name": "exactly_once", "asset": "ledger", "expectations": []}, "version"),
        (
            {"name": "other", "version": 1, "asset": "ledger", "expectations": []},
            "names suite 'other'",
        ),
        (
            {"name": "exactly_once", "version": "one", "asset": "ledger", "expectations": []},
            "invalid literal",
        ),
        ({"name": "exactly_once", "version": 1, "expectations": []}, "asset"),
        (
            {"name": "exactly_once", "version": 1, "asset": "topic", "expectations": []},
            "asset 'topic' is not one of",
        ),
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
                "asset": "ledger",
                "expectations": [expectation],
            },
        )
    )

    with pytest.raises(SuiteFileError, match=message):
        suite.to_gx()

"""GX's count of an unexpected-rows expectation's rows on the warm Spark: the rows GX fetched
when they are fewer than its limit, a count query of GX's own only when they reach it — and the
same counts, successes and agreement with the anomaly tables either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from great_expectations.constants import MAX_RESULT_RECORDS
from pyspark.sql import SparkSession
from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

from eoslab.verify.suites import SuiteFile, validate


@pytest.mark.parametrize(
    ("unexpected", "count_queries"),
    [(0, 0), (7, 0), (MAX_RESULT_RECORDS - 1, 0), (MAX_RESULT_RECORDS, 1), (450, 1)],
)
def test_an_expectations_count_is_its_rows_below_gxs_limit_and_counted_from_it(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    unexpected: int,
    count_queries: int,
) -> None:
    counted = []
    spark_count = ConnectFrame.count

    def count(frame: ConnectFrame) -> int:  # every count query of the validation
        counted.append(frame)
        return spark_count(frame)

    monkeypatch.setattr(ConnectFrame, "count", count)
    suite = SuiteFile(
        name="planted",
        version=1,
        description="a query with as many unexpected rows as planted",
        asset="log",
        expectations=[
            {
                "type": "unexpected_rows_expectation",
                "kwargs": {
                    "description": "no offset below the planted bound",
                    "unexpected_rows_query": f"SELECT * FROM {{batch}} WHERE id < {unexpected}",
                },
                "meta": {"check": "planted", "anomalies": ["lost"]},
            }
        ],
    )
    outcome = validate({"log": spark.range(1_000)}, tmp_path, {"lost": unexpected}, suites=[suite])
    (expectation,) = outcome.expectations
    assert expectation.unexpected == unexpected
    assert expectation.success is (unexpected == 0)
    assert expectation.agrees
    assert len(counted) == count_queries

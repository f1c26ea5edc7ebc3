"""The Spark checker's copy anomalies on planted copies (copy_planted.py): each found at its exact
place, nothing on the clean copy, the GX suite ``copy`` agreeing with the tables, the naive
checker (pure Python) agreeing with Spark location by location, and the copy ledger one shuffle
with no window after it shuffling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from copy_planted import ALSO, PlantedCopy, clean_copies, planted
from pyspark.sql import DataFrame, SparkSession
from test_suites import assert_read_as_clustered, names, plan_nodes
from txn_planted import RUN_ID

from eoslab.rundir import COPY_ANOMALIES
from eoslab.verify import suites
from eoslab.verify.copy import anomalies as copy_anomalies
from eoslab.verify.copy.ledger import build_copy_ledger, parse_copies
from eoslab.verify.copy.naive import copy_anomalies as naive_anomalies
from eoslab.verify.counting import count_rows
from eoslab.verify.spark_session import spark_path
from eoslab.verify.transactions.ledger import read_reads, read_transactions

pytestmark = pytest.mark.lab


def copy_ledger(spark: SparkSession, copied: PlantedCopy, root: Path) -> DataFrame:
    run = copied.write(root)
    return build_copy_ledger(
        read_transactions(spark, run),
        read_reads(spark, run, "read_committed"),
        parse_copies(spark.read.parquet(spark_path(run.copy_topic_dir)), RUN_ID),
        copied.committed,
    )


def locations(ledger: DataFrame) -> dict[str, list[Any]]:
    return {
        name: sorted(
            (
                (r.session_id, r.partition, r.seq, r.offset, r.out_partition, r.out_offset)
                for r in table.collect()
            ),
            key=repr,
        )
        for name, table in copy_anomalies.derive(ledger).items()
    }


def validate(ledger: DataFrame, root: Path, counts: dict[str, int]) -> Any:
    return suites.validate(
        {"copy_ledger": ledger},
        root / "checker",
        counts,
        [s for s in suites.load_suites(copied=True) if s.asset == "copy_ledger"],
    )


def test_the_clean_copy_has_no_copy_anomaly(spark: SparkSession, tmp_path: Path) -> None:
    ledger = copy_ledger(spark, clean_copies(), tmp_path)
    found = locations(ledger)
    assert {name: len(rows) for name, rows in found.items()} == dict.fromkeys(COPY_ANOMALIES, 0)
    report = validate(ledger, tmp_path, dict.fromkeys(COPY_ANOMALIES, 0))
    assert report.success
    assert report.agrees_with_anomalies


@pytest.mark.parametrize("name", COPY_ANOMALIES)
def test_a_planted_copy_anomaly_is_found_where_it_is(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    copied, where = planted(name)
    ledger = copy_ledger(spark, copied, tmp_path)
    found = locations(ledger)
    assert found[name] == where
    others = {n: len(rows) for n, rows in found.items() if n != name}
    assert others == {n: ALSO.get(name, {}).get(n, 0) for n in others}
    naive = naive_anomalies(
        copied.history.transactions, copied.history.reads, copied.records(), copied.committed
    )
    assert found == naive
    report = validate(ledger, tmp_path, count_rows(copy_anomalies.derive(ledger)))
    assert not report.success
    assert report.agrees_with_anomalies, report.expectations


def test_the_copy_ledger_is_one_shuffle_and_no_window_after_it_shuffles(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Sent records, visible inputs and copies meet in one exchange; every window of the copy
    anomalies and every query of the ``copy`` suite reads the cached ledger as it is
    clustered."""
    built = copy_ledger(spark, clean_copies(), tmp_path)
    assert names(plan_nodes(built)).count("Exchange") == 1
    (suite,) = [s for s in suites.load_suites(copied=True) if s.asset == "copy_ledger"]
    assert_read_as_clustered(spark, built, copy_anomalies.derive, suite)

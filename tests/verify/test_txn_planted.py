"""The Spark checker's transaction anomalies on planted histories (txn_planted.py): each found at
its exact place, nothing on the clean history, the GX suite ``transactions`` agreeing with the
tables, and the naive checker (pure Python) agreeing with Spark location by location."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from test_suites import assert_read_as_clustered, names, plan_nodes
from txn_planted import ALSO, PlantedHistory, clean, planted

from eoslab.rundir import TRANSACTION_ANOMALIES
from eoslab.verify import suites
from eoslab.verify.counting import count_rows
from eoslab.verify.transactions import anomalies as txn_anomalies
from eoslab.verify.transactions.ledger import build_txn_ledger, read_reads, read_transactions
from eoslab.verify.transactions.naive import txn_anomalies as naive_anomalies

pytestmark = pytest.mark.lab


def spark_locations(
    spark: SparkSession, history: PlantedHistory, root: Path
) -> tuple[dict[str, list[Any]], Any]:
    run = history.write(root)
    ledger = build_txn_ledger(
        read_transactions(spark, run), read_reads(spark, run, "read_committed")
    )
    found = {
        name: sorted(
            (
                (r.transactional_id, r.txn, r.session_id, r.partition, r.seq, r.offset)
                for r in table.collect()
            ),
            key=repr,
        )
        for name, table in txn_anomalies.derive(ledger).items()
    }
    return found, ledger


def test_the_clean_history_has_no_transaction_anomaly(spark: SparkSession, tmp_path: Path) -> None:
    history = clean()
    found, ledger = spark_locations(spark, history, tmp_path)
    assert {name: len(rows) for name, rows in found.items()} == dict.fromkeys(
        TRANSACTION_ANOMALIES, 0
    )
    report = suites.validate(
        {"txn_ledger": ledger},
        tmp_path / "checker",
        dict.fromkeys(TRANSACTION_ANOMALIES, 0),
        [s for s in suites.load_suites(transactional=True) if s.asset == "txn_ledger"],
    )
    assert report.success
    assert report.agrees_with_anomalies


@pytest.mark.parametrize("name", TRANSACTION_ANOMALIES)
def test_a_planted_anomaly_is_found_where_it_is(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    history, where = planted(name)
    found, ledger = spark_locations(spark, history, tmp_path)
    assert found[name] == where
    others = {n: len(rows) for n, rows in found.items() if n != name}
    assert others == {n: ALSO.get(name, {}).get(n, 0) for n in others}
    assert found == naive_anomalies(history.transactions, history.reads)
    counts = count_rows(txn_anomalies.derive(ledger))
    report = suites.validate(
        {"txn_ledger": ledger},
        tmp_path / "checker",
        counts,
        [s for s in suites.load_suites(transactional=True) if s.asset == "txn_ledger"],
    )
    assert not report.success
    assert report.agrees_with_anomalies, report.expectations


def test_the_txn_ledger_is_one_shuffle_and_no_window_after_it_shuffles(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Sent records and reads meet in one exchange; every window of the transaction anomalies
    and every query of the ``transactions`` suite reads the cached ledger as it is clustered
    (the per-transaction windows sort locally, they never shuffle)."""
    run = clean().write(tmp_path)
    built = build_txn_ledger(
        read_transactions(spark, run), read_reads(spark, run, "read_committed")
    )
    assert names(plan_nodes(built)).count("Exchange") == 1
    (suite,) = [s for s in suites.load_suites(transactional=True) if s.asset == "txn_ledger"]
    assert_read_as_clustered(spark, built, txn_anomalies.derive, suite)

"""Derive the transaction anomalies of a run from its transaction ledger, with window functions
over the layout of :mod:`eoslab.verify.transactions.ledger`: no window shuffles; the per-record
windows read the ledger as it is sorted, the per-transaction ones sort within their Spark
partition.

The read is the consumer under test's (the run's ``transactions.isolation``). Definitions (named
as Jepsen names them where they match):

- ``aborted_read`` (G1a): every read of a record whose transaction ended ``aborted``;
- ``lost_committed``: a record of a ``committed`` transaction never read;
- ``committed_duplicate``: every read of a record after its first (the same record read at a
  second offset: a consumer would process it twice);
- ``torn_transaction``: every record not read of a transaction of which some records were read
  and some not (atomicity: all or nothing). A committed transaction with a record lost is torn
  too; an indeterminate one is judged by this alone;
- ``uncommitted_read`` (Jepsen's precommitted read): a read of a record of a transaction that
  did not end aborted, made before the commit was asked for (``read_ms`` < ``end_ms``, or no
  commit asked for at all; a record of the run in no transaction of the ledger was never
  committed either). Reads of aborted transactions are ``aborted_read`` only.

Every table has the columns of :data:`TXN_LOCATION`: which transaction, which record, and where
it was read (``offset`` null for a record never read).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf
from pyspark.sql.window import WindowSpec

from eoslab.rundir import TRANSACTION_ANOMALIES, TxnOutcome
from eoslab.verify.streams import IDENTITY
from eoslab.verify.transactions.ledger import READ, SENT, TRANSACTION

TXN_LOCATION = ("transactional_id", "txn", "session_id", "partition", "seq", "key", "offset")


def _record_window() -> WindowSpec:
    return Window.partitionBy(*IDENTITY).orderBy("row_kind", "offset")


def with_transactions(ledger: DataFrame) -> DataFrame:
    """Every row with its record's transaction (a read takes its sent row's columns), the
    number of reads of its record (``reads``), a read's place among them (``occurrence``,
    1 for the first), and per transaction how many records it has (``size``) and how many of
    them were read (``visible``)."""
    whole = _record_window().rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    upto = _record_window().rowsBetween(Window.unboundedPreceding, Window.currentRow)
    carried = ("transactional_id", "txn", "outcome", "end_ms")
    by_record = ledger.select(
        *(c for c in ledger.columns if c not in carried),
        *(sf.first(c, ignorenulls=True).over(whole).alias(c) for c in carried),
        sf.sum(sf.when(sf.col("row_kind") == READ, 1).otherwise(0)).over(whole).alias("reads"),
        sf.sum(sf.col("row_kind")).over(upto).alias("occurrence"),
    )
    transaction = Window.partitionBy(*TRANSACTION)
    sent = sf.col("row_kind") == SENT
    return by_record.select(
        "*",
        sf.sum(sf.when(sent, 1).otherwise(0)).over(transaction).alias("size"),
        sf.sum(sf.when(sent & (sf.col("reads") > 0), 1).otherwise(0))
        .over(transaction)
        .alias("visible"),
    )


def _read() -> Column:
    return sf.col("row_kind") == READ


def _sent() -> Column:
    return sf.col("row_kind") == SENT


def aborted_reads(rows: DataFrame) -> DataFrame:
    return rows.where(_read() & (sf.col("outcome") == TxnOutcome.ABORTED.value)).select(
        *TXN_LOCATION, "read_ms"
    )


def lost_committed(rows: DataFrame) -> DataFrame:
    return rows.where(
        _sent() & (sf.col("outcome") == TxnOutcome.COMMITTED.value) & (sf.col("reads") == 0)
    ).select(*TXN_LOCATION)


def committed_duplicates(rows: DataFrame) -> DataFrame:
    return rows.where(_read() & (sf.col("occurrence") > 1)).select(
        *TXN_LOCATION, "occurrence", "outcome"
    )


def torn_transactions(rows: DataFrame) -> DataFrame:
    torn = (sf.col("visible") > 0) & (sf.col("visible") < sf.col("size"))
    return rows.where(_sent() & torn & (sf.col("reads") == 0)).select(
        *TXN_LOCATION, "outcome", "visible", "size"
    )


def uncommitted_reads(rows: DataFrame) -> DataFrame:
    early = sf.col("end_ms").isNull() | (sf.col("read_ms") < sf.col("end_ms"))
    not_aborted = sf.col("outcome").isNull() | (sf.col("outcome") != TxnOutcome.ABORTED.value)
    return rows.where(_read() & not_aborted & early).select(
        *TXN_LOCATION, "read_ms", "end_ms", "outcome"
    )


def derive(ledger: DataFrame) -> dict[str, DataFrame]:
    """Every transaction anomaly table, by name (:data:`TRANSACTION_ANOMALIES`), from the
    transaction ledger (:func:`eoslab.verify.transactions.ledger.build_txn_ledger`)."""
    rows = with_transactions(ledger)
    tables = {
        "aborted_read": aborted_reads(rows),
        "lost_committed": lost_committed(rows),
        "committed_duplicate": committed_duplicates(rows),
        "torn_transaction": torn_transactions(rows),
        "uncommitted_read": uncommitted_reads(rows),
    }
    return {name: tables[name] for name in TRANSACTION_ANOMALIES}


def aborted_in_log(ledger: DataFrame) -> DataFrame:
    """The records of aborted transactions a read_uncommitted read found: in the log, so that
    ``aborted_read`` 0 under read_committed means they were hidden, not absent."""
    return aborted_reads(with_transactions(ledger))

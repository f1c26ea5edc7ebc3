"""The transaction ledger as the checker lays it out: every record of every transaction beside
every time the consumer under test read it, for the windows of the transaction checks.

Two kinds of rows are unioned and shuffled **once**, by producer session, and sorted within each
Spark partition by :data:`LAYOUT` — (session, partition, seq, row_kind, offset):

- ``row_kind`` 0, a **sent** record: one record of one transaction of the ledger (its
  ``records`` exploded), with the transaction's ``transactional_id``, ``txn``, ``outcome`` and
  ``end_ms`` (when its commit or abort was asked for); ``offset`` and ``read_ms`` are null;
- ``row_kind`` 1, a **read**: a record of the run the reader at the run's isolation level read,
  at ``offset``, at ``read_ms``; the transaction columns are null.

Why the session: a record's identity is (session, partition, seq) and a transaction's is
(session, txn); both windows are partitioned by a superset of the clustering, so neither
shuffles. Within a record, its sent row comes first and its reads follow in log order.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from eoslab.rundir import READS_SCHEMA, TRANSACTIONS_SCHEMA, RunDir, TxnOutcome
from eoslab.verify.spark_session import read_dataset
from eoslab.verify.streams import IDENTITY

SENT = 0
READ = 1
TRANSACTION = ("session_id", "txn")
LAYOUT = (*IDENTITY, "row_kind", "offset")
TXN_COLUMNS = ("transactional_id", "producer", "txn", "outcome", "end_ms")
COLUMNS = (
    "row_kind",
    *IDENTITY,
    "key",
    "key_seq",
    *TXN_COLUMNS,
    "offset",
    "read_ms",
)


def read_transactions(spark: SparkSession, run: RunDir) -> DataFrame:
    """The transaction ledger's rows (TRANSACTIONS_SCHEMA), one per transaction."""
    return read_dataset(spark, run.transactions_dir, TRANSACTIONS_SCHEMA)


def read_reads(spark: SparkSession, run: RunDir, isolation: str) -> DataFrame:
    """What the reader at ``isolation`` read (READS_SCHEMA); no file reads as no rows."""
    reads = read_dataset(spark, run.reads_dir, READS_SCHEMA)
    return reads.where(sf.col("isolation") == isolation)


def aborted_records(transactions: DataFrame) -> DataFrame:
    """(session_id, partition, seq) of every record of a transaction that ended aborted."""
    return (
        transactions.where(sf.col("outcome") == TxnOutcome.ABORTED.value)
        .select("session_id", sf.explode("records").alias("record"))
        .select("session_id", "record.partition", "record.seq")
    )


def build_txn_ledger(transactions: DataFrame, reads: DataFrame) -> DataFrame:
    """The sent and read rows, clustered by session and sorted by :data:`LAYOUT`; reads of
    records that are not the run's (null session) are left out."""
    sent = transactions.select(
        sf.lit(SENT).alias("row_kind"),
        "session_id",
        *TXN_COLUMNS,
        sf.explode("records").alias("record"),
    ).select(
        *(
            sf.col(f"record.{c}").alias(c) if c in ("partition", "seq", "key", "key_seq") else c
            for c in COLUMNS
            if c not in ("offset", "read_ms")
        ),
        sf.lit(None).cast("bigint").alias("offset"),
        sf.lit(None).cast("bigint").alias("read_ms"),
    )
    read = reads.where(sf.col("session_id").isNotNull()).select(
        sf.lit(READ).alias("row_kind"),
        *IDENTITY,
        "key",
        "key_seq",
        sf.lit(None).cast("string").alias("transactional_id"),
        sf.col("producer"),
        sf.lit(None).cast("bigint").alias("txn"),
        sf.lit(None).cast("string").alias("outcome"),
        sf.lit(None).cast("bigint").alias("end_ms"),
        "offset",
        "read_ms",
    )
    return (
        sent.select(*COLUMNS)
        .unionByName(read.select(*COLUMNS))
        .repartition("session_id")
        .sortWithinPartitions(*LAYOUT)
    )

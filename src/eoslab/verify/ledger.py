"""The ledger: every run record of the log side by side with its history row.

A full outer join on (session, partition, seq): a row per record in the log (with its history
row, if any) and a row per history entry that never reached the log. Lost, phantom and
indeterminate records are rows of it with one side missing; the GX suites validate it too,
so the suites and the anomaly tables look at the very same data.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as sf

LEDGER_COLUMNS = (
    "session_id",
    "producer",
    "partition",
    "seq",
    "key",
    "key_seq",
    "offset",
    "occurrence",
    "key_occurrence",
    "outcome",
    "acked_offset",
    "error",
)
"""``offset`` is null for a history row absent from the log; ``outcome`` is null for a log record
that no history row knows (a phantom). ``occurrence`` numbers the copies of one
(session, partition, seq) in offset order, ``key_occurrence`` those of one (session, key, key_seq)."""

IDENTITY = ("session_id", "partition", "seq")


def build_ledger(records: DataFrame, history: DataFrame) -> DataFrame:
    """Join the run's records with the history on (session, partition, seq)."""
    log = records.select(
        *IDENTITY,
        sf.col("producer").alias("log_producer"),
        sf.col("key").alias("log_key"),
        sf.col("key_seq").alias("log_key_seq"),
        "offset",
    )
    sent = history.select(
        *IDENTITY,
        sf.col("producer").alias("sent_producer"),
        sf.col("key").alias("sent_key"),
        sf.col("key_seq").alias("sent_key_seq"),
        "outcome",
        sf.col("offset").alias("acked_offset"),
        "error",
    )
    joined = log.join(sent, on=list(IDENTITY), how="full_outer").select(
        *IDENTITY,
        sf.coalesce("log_producer", "sent_producer").alias("producer"),
        sf.coalesce("log_key", "sent_key").alias("key"),
        sf.coalesce("log_key_seq", "sent_key_seq").alias("key_seq"),
        "offset",
        "outcome",
        "acked_offset",
        "error",
    )
    in_log = sf.col("offset").isNotNull()
    copies = Window.partitionBy(*IDENTITY, in_log).orderBy("offset")
    key_copies = Window.partitionBy("session_id", "key", "key_seq", in_log).orderBy(
        "partition", "offset"
    )
    return joined.select(
        *(c for c in LEDGER_COLUMNS if "occurrence" not in c),
        sf.when(in_log, sf.row_number().over(copies)).alias("occurrence"),
        sf.when(in_log, sf.row_number().over(key_copies)).alias("key_occurrence"),
    ).select(*LEDGER_COLUMNS)

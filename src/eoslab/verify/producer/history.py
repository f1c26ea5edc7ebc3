"""Read the producers' history (a Parquet dataset, the contract's schema), and the outcomes that
excuse a record's absence from the log."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from eoslab.rundir import HISTORY_SCHEMA, Outcome
from eoslab.verify.spark_session import read_dataset

EXCUSED_OUTCOMES = (
    Outcome.FAIL.value,
    Outcome.UNSENT.value,
    Outcome.DELETED.value,
    Outcome.ABORTED.value,
)
"""Outcomes that say a record is rightly absent from the log (never written, deleted on
purpose, or of an aborted transaction): a sequence skipped for them is no gap."""

NOT_ACKED_OUTCOMES = (
    Outcome.FAIL.value,
    Outcome.INDETERMINATE.value,
    Outcome.UNSENT.value,
    Outcome.ABORTED.value,
)
"""Outcomes after which a record found in the log counts as `indeterminate`."""


def read_history(
    spark: SparkSession, history_dir: Path, log_starts: Mapping[int, int] | None = None
) -> DataFrame:
    """The history rows (a run whose producers never reported: its records are phantoms);
    acknowledged records below a partition's ``log_starts`` offset (moved by a delete-records
    step) become ``deleted``."""
    history = read_dataset(spark, history_dir, HISTORY_SCHEMA)
    if not log_starts:
        return history
    below = sf.lit(False)
    for partition, start in log_starts.items():
        below = below | ((sf.col("partition") == partition) & (sf.col("offset") < start))
    deleted = (sf.col("outcome") == Outcome.ACK.value) & below
    return history.withColumn(
        "outcome", sf.when(deleted, Outcome.DELETED.value).otherwise(sf.col("outcome"))
    )


def excuse_aborted(history: DataFrame, aborted: DataFrame) -> DataFrame:
    """The history with every record of an aborted transaction that was not acknowledged
    marked ``aborted`` (rightly absent from the log); ``aborted`` holds those records'
    (session_id, partition, seq): few, broadcast."""
    flagged = aborted.select("session_id", "partition", "seq", sf.lit(True).alias("in_aborted"))
    excused = sf.col("in_aborted") & (sf.col("outcome") != Outcome.ACK.value)
    return (
        history.join(sf.broadcast(flagged), on=["session_id", "partition", "seq"], how="left")
        .withColumn("outcome", sf.when(excused, Outcome.ABORTED.value).otherwise(sf.col("outcome")))
        .select(*history.columns)
    )

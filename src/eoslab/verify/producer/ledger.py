"""The ledger: every run record of the log side by side with its history row, laid out for
the windows that follow.

Log rows and history rows are unioned and shuffled **once**, by producer session and partition,
and sorted within each Spark partition by (session, partition, seq, offset): every sequence
stream of a partition is then contiguous and in sequence order, with a record's history row
(offset null) just before its copies in the log. Spark keeps that layout on the cached frame, so
the windows of the anomaly derivation and of the GX suites over (session, partition[, seq])
need no further shuffle and no sort. The per-key view needs another clustering: :func:`by_key`
shuffles the ledger once more, by (session, key).

A join would do the same work twice (a full outer join reports no ordering, so every window
after it sorts again); at 8M records that one exchange is most of the checker's time.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from eoslab.message import RECORD_FIELDS
from eoslab.verify.streams import IDENTITY, KEY_IDENTITY, KEY_STREAM, PARTITION_STREAM

RUN_COLUMNS = (*RECORD_FIELDS, "offset", "occurrence", "outcome", "acked_offset", "error")
LEDGER_COLUMNS = (*RUN_COLUMNS, "reason", "value_head")
"""A row per record in the log (with its history row's outcome, acked offset and error, if any)
and a row per history entry that never reached the log (``offset`` null). ``outcome`` is null
for a log record that no history row knows (a phantom). ``occurrence`` numbers the copies of one
(session, partition, seq) in offset order. ``reason`` is not null for a record that is not
the run's (another format or run) or is the run's but flawed (misplaced, corrupt: see
:func:`eoslab.verify.topic_reader.classify`); such rows take part in nothing else."""

_HISTORY_ONLY = ("outcome", "acked_offset", "error")
_LOG_ONLY = ("offset", "reason", "value_head")


def _typed_nulls(frame: DataFrame, columns: tuple[str, ...]) -> list[Column]:
    return [sf.lit(None).cast(frame.schema[c].dataType).alias(c) for c in columns]


def build_ledger(classified: DataFrame, history: DataFrame) -> DataFrame:
    """The ledger of a run: ``classified`` rows of the topic and the history, clustered by
    (session, partition) and sorted by (session, partition, seq, offset)."""
    common = RECORD_FIELDS
    run_record = sf.col("reason").isNull()
    log = classified.select(
        # a foreign record may name one of the run's sessions: it must not count as a copy
        *(c if c == "partition" else sf.when(run_record, sf.col(c)).alias(c) for c in common),
        *_LOG_ONLY,
        *_typed_nulls(history, ("outcome", "error")),
        sf.lit(None).cast("bigint").alias("acked_offset"),
    )
    sent = history.select(
        *common,
        sf.lit(None).cast("bigint").alias("offset"),
        *_typed_nulls(classified, ("reason", "value_head")),
        "outcome",
        "error",
        sf.col("offset").alias("acked_offset"),
    )
    rows = (
        log.unionByName(sent)
        .repartition(*PARTITION_STREAM)
        .sortWithinPartitions(*IDENTITY, "offset")
    )
    so_far = (
        Window.partitionBy(*IDENTITY)
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    whole = so_far.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    in_log = sf.col("offset").isNotNull()
    joined = rows.select(
        *common,
        "offset",
        sf.when(in_log, sf.count("offset").over(so_far)).alias("occurrence"),
        # the history row sorts first (offset null): its fields reach every copy
        *(sf.first(c, ignorenulls=True).over(so_far).alias(c) for c in _HISTORY_ONLY),
        "reason",
        "value_head",
        sf.count("offset").over(whole).alias("copies"),
    )
    return joined.where(in_log | (sf.col("copies") == 0)).select(*LEDGER_COLUMNS)


def run_rows(ledger: DataFrame) -> DataFrame:
    """The ledger without foreign (or flawed) records."""
    return ledger.where(sf.col("reason").isNull())


def by_key(ledger: DataFrame) -> DataFrame:
    """The run rows of the ledger clustered by (session, key), sorted by (session, key, key_seq,
    partition, offset), with ``key_occurrence``: the copies of one (session, key, key_seq)
    numbered in (partition, offset) order."""
    so_far = (
        Window.partitionBy(*KEY_IDENTITY)
        .orderBy("partition", "offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    rows = (
        run_rows(ledger)
        .select(*RUN_COLUMNS)
        .repartition(*KEY_STREAM)
        .sortWithinPartitions(*KEY_IDENTITY, "partition", "offset")
    )
    return rows.withColumn(
        "key_occurrence",
        sf.when(sf.col("offset").isNotNull(), sf.count("offset").over(so_far)),
    )

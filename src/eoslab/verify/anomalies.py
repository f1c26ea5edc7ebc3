"""Derive every anomaly of a run from its ledger, with window functions over sequence streams.

A sequence stream is one producer session's records in one partition (``seq``) or for one key
(``key_seq``). The checks are the same on both; only the columns differ (:class:`SequenceScope`).
Definitions (ARCHITECTURE.md, "Message format and anomalies"):

- ``duplicate``: every copy of a sequence after its first, in (partition, offset) order;
- ``reorder``: a sequence's first copy found after a higher sequence of its stream (records in
  offset order within a partition); later copies are duplicates, not reorders;
- ``gap``: a sequence below the highest one in the log that is absent from the log although its
  send was not a definite failure (history outcome ``fail`` or ``unsent``);
- ``lost``: acknowledged in the history, absent from the log;
- ``phantom``: in the log, never sent (no history row);
- ``indeterminate``: in the log although the history says fail, indeterminate or unsent (one
  per history row, however many copies).

Phantoms take no part in the order and gap checks: their sequence numbers were not assigned by
this run, and they are reported once, as phantoms. Every table has the columns of
:data:`LOCATION`: where to look in the log, and which record it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from eoslab.rundir import ANOMALIES
from eoslab.verify.history import EXCUSED_OUTCOMES, NOT_ACKED_OUTCOMES

LOCATION = ("session_id", "producer", "partition", "offset", "seq", "key", "key_seq")
"""``offset`` is where the record is; for ``lost`` the offset the broker acknowledged; for a gap
the offset of the next record of the stream, where the skip shows."""

FOREIGN = "foreign"
"""Records of other formats or runs: reported and counted, not an anomaly."""


@dataclass(frozen=True)
class SequenceScope:
    """Which columns make a sequence stream, and how its records are ordered in the log."""

    prefix: str
    stream: tuple[str, ...]
    seq: str
    occurrence: str
    log_order: tuple[str, ...]


PARTITION_SCOPE = SequenceScope(
    prefix="",
    stream=("session_id", "partition"),
    seq="seq",
    occurrence="occurrence",
    log_order=("session_id", "partition"),
)
KEY_SCOPE = SequenceScope(
    prefix="key_",
    stream=("session_id", "key"),
    seq="key_seq",
    occurrence="key_occurrence",
    log_order=("session_id", "key", "partition"),
)


def _in_log() -> Column:
    return sf.col("offset").isNotNull()


def _sent() -> Column:
    return sf.col("outcome").isNotNull()


def duplicates(ledger: DataFrame, scope: SequenceScope) -> DataFrame:
    """Every copy after the first, with where the first copy is."""
    copies = Window.partitionBy(*scope.stream, scope.seq).orderBy("partition", "offset")
    return (
        ledger.where(_in_log())
        .withColumn("first_partition", sf.first("partition").over(copies))
        .withColumn("first_offset", sf.first("offset").over(copies))
        .where(sf.col(scope.occurrence) > 1)
        .select(*LOCATION, "first_partition", "first_offset")
    )


def reorders(ledger: DataFrame, scope: SequenceScope) -> DataFrame:
    """First copies of a sequence that come after a higher sequence of the same stream."""
    earlier = (
        Window.partitionBy(*scope.log_order)
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    highest_before = f"highest_earlier_{scope.seq}"
    return (
        ledger.where(_in_log() & _sent() & (sf.col(scope.occurrence) == 1))
        .withColumn(highest_before, sf.max(scope.seq).over(earlier))
        .where(sf.col(scope.seq) < sf.col(highest_before))
        .select(*LOCATION, highest_before)
    )


def gaps(ledger: DataFrame, scope: SequenceScope) -> DataFrame:
    """Sequences skipped by the log (below the stream's highest present one) that were not
    definitely failed; each row says between which sequences it is missing and where."""
    seq = scope.seq
    previous, following = f"previous_{seq}", f"next_{seq}"
    present = (
        ledger.where(_in_log() & _sent())
        .groupBy(*scope.stream, seq)
        .agg(sf.min(sf.struct("partition", "offset", "producer")).alias("at"))
    )
    by_seq = Window.partitionBy(*scope.stream).orderBy(seq)
    holes = present.withColumn(previous, sf.coalesce(sf.lag(seq).over(by_seq), sf.lit(-1))).where(
        sf.col(seq) - sf.col(previous) > 1
    )
    missing = holes.select(
        *scope.stream,
        sf.explode(sf.sequence(sf.col(previous) + 1, sf.col(seq) - 1)).alias(seq),
        previous,
        sf.col(seq).alias(following),
        sf.col("at.partition").alias("at_partition"),
        sf.col("at.offset").alias("offset"),
        sf.col("at.producer").alias("producer"),
    )
    excused = ledger.where(sf.col("outcome").isin(*EXCUSED_OUTCOMES)).select(*scope.stream, seq)
    details = [c for c in ("seq", "key", "key_seq") if c not in (*scope.stream, seq)]
    never_logged = ledger.where(~_in_log()).select(*scope.stream, seq, *details, "outcome")
    return (
        missing.join(excused, on=[*scope.stream, seq], how="left_anti")
        .join(never_logged, on=[*scope.stream, seq], how="left")
        .withColumn("partition", sf.col("at_partition"))
        .select(*LOCATION, previous, following, "outcome")
    )


def lost(ledger: DataFrame) -> DataFrame:
    """Acknowledged sends absent from the log, at the offset the broker acknowledged."""
    return ledger.where((sf.col("outcome") == "ack") & ~_in_log()).select(
        *(sf.col("acked_offset").alias("offset") if c == "offset" else c for c in LOCATION)
    )


def phantoms(ledger: DataFrame) -> DataFrame:
    """Records in the log that the history never sent."""
    return ledger.where(_in_log() & ~_sent()).select(*LOCATION)


def indeterminates(ledger: DataFrame) -> DataFrame:
    """Records in the log that the client reported as not (or not surely) written."""
    return ledger.where(
        _in_log() & sf.col("outcome").isin(*NOT_ACKED_OUTCOMES) & (sf.col("occurrence") == 1)
    ).select(*LOCATION, "outcome", "error")


def derive(ledger: DataFrame) -> dict[str, DataFrame]:
    """Every anomaly table, by name (the names of :data:`ANOMALIES`)."""
    tables = {
        "lost": lost(ledger),
        "phantom": phantoms(ledger),
        "indeterminate": indeterminates(ledger),
    }
    for scope in (PARTITION_SCOPE, KEY_SCOPE):
        tables[f"{scope.prefix}duplicate"] = duplicates(ledger, scope)
        tables[f"{scope.prefix}reorder"] = reorders(ledger, scope)
        tables[f"{scope.prefix}gap"] = gaps(ledger, scope)
    return {name: tables[name] for name in ANOMALIES}

"""Sequence streams, the idea every half's checks share: one producer session's records in one
partition (``seq``, identity (session, partition, seq)) or for one key (``key_seq``), and the
checks that read a stream the same way wherever its records land (the producer half's log, the
consumer half's sink): its duplicates and its reorders (definitions in
:mod:`eoslab.verify.producer.anomalies`)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from eoslab.message import RECORD_FIELDS

PARTITION_STREAM = ("session_id", "partition")
KEY_STREAM = ("session_id", "key")
IDENTITY = (*PARTITION_STREAM, "seq")
KEY_IDENTITY = (*KEY_STREAM, "key_seq")

LOCATION = (*RECORD_FIELDS, "offset")
"""``offset`` is where the record is; for ``lost`` the offset the broker acknowledged; for a gap
the offset of the next record of the stream, where the skip shows."""


@dataclass(frozen=True)
class SequenceScope:
    """Which columns make a sequence stream, and how its records are ordered where they land:
    in the log (``position`` an offset, within ``log_order``), or in the sink (the effects'
    ``apply_order``, see :mod:`eoslab.verify.consumer.anomalies`)."""

    prefix: str
    stream: tuple[str, ...]
    seq: str
    occurrence: str
    copy_order: tuple[str, ...]
    log_order: tuple[str, ...]
    position: str = "offset"
    details: tuple[str, ...] = ()
    """Columns kept in the scope's tables beside :data:`LOCATION`."""
    first_columns: tuple[str, ...] = ("partition", "offset")
    """Columns of a sequence's first copy that its duplicates carry as ``first_<column>``."""


def in_log() -> Column:
    """A row of a record found in the log (not a send that never reached it)."""
    return sf.col("offset").isNotNull()


def duplicates(ledger: DataFrame, scope: SequenceScope) -> DataFrame:
    """Every copy after the first, with where the first copy is."""
    copies = (
        Window.partitionBy(*scope.stream, scope.seq)
        .orderBy(*scope.copy_order)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        ledger.where(in_log())
        .select("*", *(sf.first(c).over(copies).alias(f"first_{c}") for c in scope.first_columns))
        .where(sf.col(scope.occurrence) > 1)
        .select(*LOCATION, *scope.details, *(f"first_{c}" for c in scope.first_columns))
    )


def reorders(firsts: DataFrame, scope: SequenceScope) -> DataFrame:
    """First copies of a sequence that come after a higher sequence of the same stream.

    If, in sequence order, the positions of a stream's first copies never fall, no part of it
    is out of order (positions are distinct within ``log_order``): only the streams where one
    falls are sorted by position."""
    position = scope.position
    following = Window.partitionBy(*scope.stream).orderBy(scope.seq)
    out_of_step = sf.lead(position).over(following) < sf.col(position)
    suspect_streams = (
        firsts.withColumn("out_of_step", out_of_step)
        .where("out_of_step")
        .select(*scope.stream)
        .distinct()
    )
    earlier = (
        Window.partitionBy(*scope.log_order)
        .orderBy(position)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    highest_before = f"highest_earlier_{scope.seq}"
    return (
        firsts.join(sf.broadcast(suspect_streams), on=list(scope.stream), how="left_semi")
        .withColumn(highest_before, sf.max(scope.seq).over(earlier))
        .where(sf.col(scope.seq) < sf.col(highest_before))
        .select(*LOCATION, *scope.details, highest_before)
    )

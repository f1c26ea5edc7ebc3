"""Derive the copy anomalies of a run (consume-transform-produce, issue 21) from its copy ledger,
with window functions over the layout of :mod:`eoslab.verify.copy.ledger`: none shuffles.

An **input** is a place of the input topic (a record's identity and its offset); the copies are
what a read_committed consumer reads of the output topic. Definitions:

- ``lost_copy``: an input the read_committed reader read (visible to read_committed) of which
  no copy is visible;
- ``duplicate_copy``: every copy of an input after its first (the input copied twice: what
  Kafka's exactly-once exists to prevent);
- ``copy_of_aborted``: every copy of a record whose input transaction ended aborted;
- ``committed_uncopied``: a ``lost_copy`` below the offset the copier group committed for its
  partition (its offset committed, its copy not: the offsets ran ahead of the output).

Every table has the columns of :data:`COPY_LOCATION`: the input (identity and offset) and, for
a copy, where it is and who made it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from eoslab.rundir import COPY_ANOMALIES, TxnOutcome
from eoslab.verify.copy.ledger import COPY, COPY_COLUMNS, PLACE, VISIBLE
from eoslab.verify.streams import IDENTITY

COPY_LOCATION = (*PLACE, *COPY_COLUMNS)


def with_copies(ledger: DataFrame) -> DataFrame:
    """Every row with its record's input transaction outcome, the number of copies of its
    input (``copies``) and a copy's place among them (``occurrence``, 1 for the first, in
    output order)."""
    record = Window.partitionBy(*IDENTITY)
    place = Window.partitionBy(*PLACE)
    in_order = place.orderBy("row_kind", "out_partition", "out_offset").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    copy = sf.when(sf.col("row_kind") == COPY, 1).otherwise(0)
    return ledger.select(
        *(c for c in ledger.columns if c != "outcome"),
        sf.first("outcome", ignorenulls=True).over(record).alias("outcome"),
        sf.sum(copy).over(place).alias("copies"),
        sf.sum(copy).over(in_order).alias("occurrence"),
    )


def _copy() -> Column:
    return sf.col("row_kind") == COPY


def _uncopied() -> Column:
    return (sf.col("row_kind") == VISIBLE) & (sf.col("copies") == 0)


def derive(ledger: DataFrame) -> dict[str, DataFrame]:
    """Every copy anomaly table, by name (:data:`COPY_ANOMALIES`), from the copy ledger
    (:func:`eoslab.verify.copy.ledger.build_copy_ledger`)."""
    rows = with_copies(ledger)
    below_commit = sf.coalesce(sf.col("offset") < sf.col("committed_offset"), sf.lit(False))
    tables = {
        "lost_copy": rows.where(_uncopied()).select(*COPY_LOCATION),
        "duplicate_copy": rows.where(_copy() & (sf.col("occurrence") > 1)).select(
            *COPY_LOCATION, "occurrence"
        ),
        "copy_of_aborted": rows.where(
            _copy() & (sf.col("outcome") == TxnOutcome.ABORTED.value)
        ).select(*COPY_LOCATION),
        "committed_uncopied": rows.where(_uncopied() & below_commit).select(
            *COPY_LOCATION, "committed_offset"
        ),
    }
    return {name: tables[name] for name in COPY_ANOMALIES}

"""Derive every anomaly of a run from its ledgers, with window functions over sequence streams.

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
  per history row, however many copies);
- ``misplaced``: a record of the run in another partition than the one its value says it was
  sent to; ``corrupt``: a value that parses as the run's but fails its checksum (see
  :func:`eoslab.verify.topic_reader.classify`). Neither takes part in another check: what such
  a record says cannot be trusted (a misplaced record's send shows as lost from its partition).

Phantoms take no part in the order and gap checks: their sequence numbers were not assigned by
this run, and they are reported once, as phantoms. Every table has the columns of
:data:`~eoslab.verify.streams.LOCATION`: where to look in the log, and which record it is.

Every window here is partitioned and ordered as the ledger it reads is already laid out (see
:mod:`eoslab.verify.producer.ledger`), so none of them shuffles or sorts the whole run. The one
check that needs log order, reorders (:func:`eoslab.verify.streams.reorders`), first looks for
streams whose offsets do not rise with their sequences (a ``lead`` in sequence order) and sorts
only those.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from eoslab.rundir import PRODUCER_ANOMALIES, RUN_FLAWS
from eoslab.verify.producer.history import EXCUSED_OUTCOMES, NOT_ACKED_OUTCOMES
from eoslab.verify.producer.ledger import run_rows
from eoslab.verify.streams import (
    KEY_STREAM,
    LOCATION,
    PARTITION_STREAM,
    SequenceScope,
    duplicates,
    in_log,
    reorders,
)

FOREIGN_COLUMNS = ("partition", "offset", "reason", "value_head")

PARTITION_SCOPE = SequenceScope(
    prefix="",
    stream=PARTITION_STREAM,
    seq="seq",
    occurrence="occurrence",
    copy_order=("offset",),
    log_order=PARTITION_STREAM,
)
KEY_SCOPE = SequenceScope(
    prefix="key_",
    stream=KEY_STREAM,
    seq="key_seq",
    occurrence="key_occurrence",
    copy_order=("partition", "offset"),
    log_order=(*KEY_STREAM, "partition"),
)


def _sent() -> Column:
    return sf.col("outcome").isNotNull()


def first_copies(ledger: DataFrame, scope: SequenceScope) -> DataFrame:
    """The first copy in the log of every sequence the history sent (phantoms take no part)."""
    return ledger.where(in_log() & _sent() & (sf.col(scope.occurrence) == 1))


def gaps(ledger: DataFrame, scope: SequenceScope) -> DataFrame:
    """Sequences skipped by the log (below the stream's highest present one) that were not
    definitely failed; each row says between which sequences it is missing and where."""
    seq = scope.seq
    previous, following = f"previous_{seq}", f"next_{seq}"
    by_seq = Window.partitionBy(*scope.stream).orderBy(seq, *scope.copy_order)
    # copies follow their first one at a step of 0: a hole shows at the first copy after it
    holes = (
        ledger.where(in_log() & _sent())
        .withColumn(previous, sf.coalesce(sf.lag(seq).over(by_seq), sf.lit(-1)))
        .where(sf.col(seq) - sf.col(previous) > 1)
    )
    missing = holes.select(
        *scope.stream,
        sf.explode(sf.sequence(sf.col(previous) + 1, sf.col(seq) - 1)).alias(seq),
        previous,
        sf.col(seq).alias(following),
        sf.col("partition").alias("at_partition"),
        "offset",
        "producer",
    )
    never_logged = ledger.where(~in_log())
    excused = never_logged.where(sf.col("outcome").isin(*EXCUSED_OUTCOMES))
    details = [c for c in ("seq", "key", "key_seq") if c not in (*scope.stream, seq)]
    return (
        missing.join(excused.select(*scope.stream, seq), on=[*scope.stream, seq], how="left_anti")
        .join(
            never_logged.select(*scope.stream, seq, *details, "outcome"),
            on=[*scope.stream, seq],
            how="left",
        )
        .withColumn("partition", sf.col("at_partition"))
        .select(*LOCATION, previous, following, "outcome")
    )


def lost(ledger: DataFrame) -> DataFrame:
    """Acknowledged sends absent from the log, at the offset the broker acknowledged."""
    return ledger.where((sf.col("outcome") == "ack") & ~in_log()).select(
        *(sf.col("acked_offset").alias("offset") if c == "offset" else c for c in LOCATION)
    )


def phantoms(ledger: DataFrame) -> DataFrame:
    """Records in the log that the history never sent."""
    return ledger.where(in_log() & ~_sent()).select(*LOCATION)


def indeterminates(ledger: DataFrame) -> DataFrame:
    """Records in the log that the client reported as not (or not surely) written."""
    return ledger.where(
        in_log() & sf.col("outcome").isin(*NOT_ACKED_OUTCOMES) & (sf.col("occurrence") == 1)
    ).select(*LOCATION, "outcome", "error")


def foreign(ledger: DataFrame) -> DataFrame:
    """Records of the topic that are not this run's (nor flawed records of it)."""
    return ledger.where(~sf.col("reason").isin(*RUN_FLAWS)).select(*FOREIGN_COLUMNS)


def flawed(ledger: DataFrame, flaw: str) -> DataFrame:
    """Records of the run with a flaw (:data:`eoslab.verify.topic_reader.RUN_FLAWS`): in
    another partition than their value names, or failing their checksum."""
    return ledger.where(sf.col("reason") == flaw).select(*FOREIGN_COLUMNS)


def derive(ledger: DataFrame, key_ledger: DataFrame) -> dict[str, DataFrame]:
    """Every anomaly table, by name (the names of :data:`PRODUCER_ANOMALIES`), from the ledger and
    its per-key layout (:func:`eoslab.verify.producer.ledger.by_key`)."""
    run = run_rows(ledger)
    tables = {"lost": lost(run), "phantom": phantoms(run), "indeterminate": indeterminates(run)}
    tables |= {flaw: flawed(ledger, flaw) for flaw in RUN_FLAWS}
    for scope, frame in ((PARTITION_SCOPE, run), (KEY_SCOPE, key_ledger)):
        tables[f"{scope.prefix}duplicate"] = duplicates(frame, scope)
        tables[f"{scope.prefix}reorder"] = reorders(first_copies(frame, scope), scope)
        tables[f"{scope.prefix}gap"] = gaps(frame, scope)
    return {name: tables[name] for name in PRODUCER_ANOMALIES}

"""Derive the consumer half's anomalies from the consumer ledger (ARCHITECTURE.md, "The consumer
half"; the ledger and its layout: :mod:`eoslab.verify.consumer.ledger`).

Records are counted per place in the log (partition, offset), effects per message (the
producer's identity, ``message_id``):

- ``unprocessed``: a record of the log below its partition's committed offset that no consumer
  processed and no effect was read from. The group committed past it without reading it, the
  at-most-once loss. A copy of a message the producer wrote twice is a record of its own: it
  is unprocessed even if its other copy was applied, the consumer skipped it all the same.
- ``redelivered``: every processing of a record after its first (in processing time), whatever
  the processing did (applied, skipped as a duplicate, passed over as foreign): allowed under
  at-least-once, counted. Two copies of one message, each processed once, are no redelivery.
- ``effect_duplicate``: every effect of a message in the sink after its first (in the log order
  of the copy it was read from, then apply order), the exactly-once violation. A producer
  duplicate applied once per copy is one: the order got the command twice, end to end. A
  processing skipped as a duplicate left no effect and counts for nothing here.
- ``effect_reorder``: per producer session and key, a message's first effect applied (the
  sink's ``apply_order``) after the first effect of a higher key_seq: the order saw its
  commands out of order. A message's later effects are duplicates, not reorders, as for the
  log (:mod:`eoslab.verify.producer.anomalies`, whose checks these two are, over the sink's order);
- ``effect_lost``: a message of the run that some consumer processed (applied, or skipped as a
  duplicate) and whose effect is nowhere in the sink, whichever copy it was read from: one row
  per message, at its first processing (in the log order of its copies). A processing skipped
  as a duplicate is one when nothing of the message landed: the idempotent handler's guard
  skips a key_seq at or below the last one its order applied, so an older record arriving late
  (after a later key_seq of its key) is never applied. Every handler's skip is checked against
  the sink, not against the handler's word: a message the dedup-table handler skips has its
  effect in the sink (PROCESSED_MESSAGE and the effect commit together), one the idempotent
  handler skips as applied already has it too; an ``applied`` processing whose effect is not in
  the sink (a sink that lost a committed transaction) is lost as well.

What each consumer saw, from the consumption ledger's processings alone (Jepsen's Kafka checker
judges the same of its polls). An *assignment epoch* is one consumer session in one generation
(KIP-848: member epoch) and one assignment of the partition (its client's rebalance callbacks:
a partition lost and assigned again is a new epoch though the generation its client reports
stays); within it, a partition's processings in processing order (``n``):

- ``poll_skip``: a processing whose offset is past the one before it plus one, with records of
  the log in between (offsets without a record, transaction markers, are no skip): the consumer
  jumped over records it was assigned. One row per jump, with how many records it skipped;
- ``nonmonotonic_poll``: a processing at or below the offset of the one before it: the consumer
  went back without a rebalance (a new generation or assignment restarts from the committed
  offset, and is another epoch).

And per consumer session and partition, whatever the generation: ``watermark_regression``, a
processing whose high watermark (the end of the partition as the session's client last learned
it from a fetch, journaled with every record it handed out: librdkafka's cached watermark,
franz-go's fetch partition's, the Java client's position plus its current lag — its last stable
offset under read_committed) is below the highest one the session was told before: the
partition's committed end went backwards for a reader (a leader that became one knowing less
than the one before it, a truncation). Processings whose client did not say are left out.

And what the consumers and the checker found at one place of the log:
``inconsistent_offset`` (Jepsen's inconsistent offsets): a partition's offset that was found
holding two different records of the run — by two processings, or by a processing and the log
as the checker reads it when the run is over (a record a consumer read, then truncated away and
replaced by another: an unclean leader election's doing). One row per place, with how many
records were found there. A place gone from the log (deleted below its start, truncated past
its end) is judged by its processings alone; a foreign record holds no message to disagree
about.

And from its commits: ``offset_regression``: a successful commit of a partition below the
group's committed offset before it (the last successful commit of that partition, in commit
time): the group's position moved backwards, so what lies between is delivered again.

Like ``unprocessed``, ``poll_skip`` takes every record of the log for one a consumer must see: a
consumer workload reading transactional producers' records at read_committed never sees an
aborted one, and that pairing is not judged here.

Foreign records (not the run's: see :func:`eoslab.verify.topic_reader.classify`) are records:
they can be unprocessed or redelivered (a consumer reads and passes over every record of its
partitions, and its ledger says so), never take part in the effect checks (they have none).
Every table of records and processings has the columns of
:data:`eoslab.verify.streams.LOCATION` (the partition and offset the consumer read the record
from) and the message's ``message_id``; ``offset_regression``'s rows are commits (the partition,
the committed offset, the one before it, who committed).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from eoslab.rundir import CONSUMER_ANOMALIES
from eoslab.verify.consumer.ledger import EFFECT, POLL_EPOCH, PROCESSED, RECORD
from eoslab.verify.streams import KEY_STREAM, LOCATION, SequenceScope, duplicates, reorders

EFFECT_SCOPE = SequenceScope(
    prefix="effect_",
    stream=KEY_STREAM,
    seq="key_seq",
    occurrence="effect_occurrence",
    copy_order=("partition", "offset", "apply_order"),
    log_order=KEY_STREAM,
    position="apply_order",
    details=("message_id", "apply_order", "command", "consumer", "consumer_session", "generation"),
    first_columns=("partition", "offset", "apply_order", "consumer_session"),
)
"""A key stream's effects, ordered where they land: the sink's apply order, one sequence for
every partition (a key spread over partitions is still one order)."""


PROCESSING = (
    "message_id",
    "effect",
    "consumer",
    "consumer_session",
    "generation",
    "n",
    "processed_ms",
)
"""The columns of a processing that the tables of processed rows carry beside the location."""


def _kind(frame: DataFrame, kind: str) -> DataFrame:
    return frame.where(sf.col("kind") == kind)


def message_id() -> Column:
    """:func:`eoslab.rundir.message_id` of a record row of the run (null for a foreign one)."""
    return sf.when(
        sf.col("session_id").isNotNull(),
        sf.concat_ws(":", "session_id", "partition", "seq"),
    ).alias("message_id")


def unprocessed(consumer_ledger: DataFrame) -> DataFrame:
    return (
        _kind(consumer_ledger, RECORD)
        .where(
            (sf.col("offset") < sf.col("committed_offset"))
            & (sf.col("processings") == 0)
            & (sf.col("landed") == 0)
        )
        .select(*LOCATION, message_id(), "committed_offset", "reason")
    )


def redelivered(consumer_ledger: DataFrame) -> DataFrame:
    return (
        _kind(consumer_ledger, PROCESSED)
        .where(sf.col("delivery") > 1)
        .select(
            *LOCATION,
            *PROCESSING,
            "delivery",
            "first_processed_by",
        )
    )


def effect_lost(consumer_ledger: DataFrame) -> DataFrame:
    return (
        _kind(consumer_ledger, PROCESSED)
        .where((sf.col("message_delivery") == 1) & (sf.col("message_landed") == 0))
        .select(
            *LOCATION,
            *PROCESSING,
            "processings",
        )
    )


POLL = (
    *LOCATION,
    "message_id",
    "previous_offset",
    "consumer",
    "consumer_session",
    "generation",
    "assignment",
    "n",
)
"""The columns of the poll tables: the processing where the anomaly shows, and the offset of the
one before it in its epoch."""


def _polled(polls: DataFrame) -> DataFrame:
    """The polls (:func:`eoslab.verify.consumer.ledger.build_polls`), each with the offset and
    the log's count ``through`` of the processing before it in its epoch; the window reads
    them as they lie."""
    in_order = Window.partitionBy(*POLL_EPOCH).orderBy("n")
    return polls.select(
        "*",
        sf.lag("offset").over(in_order).alias("previous_offset"),
        sf.lag("through").over(in_order).alias("previous_through"),
    )


def poll_skips(polled: DataFrame) -> DataFrame:
    """Processings past the one before them with records of the log in between (one row per
    jump, with how many it skipped)."""
    skipped = sf.col("before") - sf.col("previous_through")
    return polled.where((sf.col("offset") > sf.col("previous_offset")) & (skipped > 0)).select(
        *POLL, skipped.alias("skipped")
    )


def nonmonotonic_polls(polled: DataFrame) -> DataFrame:
    """Processings at or below the offset of the one before them in their epoch."""
    return polled.where(sf.col("offset") <= sf.col("previous_offset")).select(*POLL)


def watermark_regressions(polls: DataFrame) -> DataFrame:
    """Processings whose high watermark is below the highest one their session was told
    before for the partition (one row each, with that highest one). A session's generations and
    its assignments of a partition rise with its processings: ordered by (generation,
    assignment, n), as the polls lie, the window is processing order without a sort."""
    before = (
        Window.partitionBy("partition", "consumer_session")
        .orderBy("generation", "assignment", "n")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    return (
        polls.select("*", sf.max("watermark").over(before).alias("highest_before"))
        .where(sf.col("watermark") < sf.col("highest_before"))
        .select(*LOCATION, "message_id", "watermark", "highest_before", *POLL[-5:])
    )


def inconsistent_offsets(polls: DataFrame) -> DataFrame:
    """Places found holding more than one record of the run, one row each, with the messages
    its processings found there and who processed them (the polls are clustered by Kafka
    partition: no exchange)."""
    return (
        polls.where(sf.col("identities") > 1)
        .groupBy("partition", "offset")
        .agg(
            sf.max("identities").alias("identities"),
            sf.sort_array(sf.collect_set("message_id")).alias("processed_messages"),
            sf.sort_array(sf.collect_set("consumer_session")).alias("consumer_sessions"),
        )
    )


def offset_regressions(commits: DataFrame) -> DataFrame:
    """Successful commits of a partition below the last successful one before them (commit time,
    then session and commit number for commits of one moment)."""
    in_time = Window.partitionBy("partition").orderBy("committed_ms", "consumer_session", "commit")
    return (
        commits.where(sf.col("error").isNull())
        .withColumn("previous_offset", sf.lag("offset").over(in_time))
        .where(sf.col("offset") < sf.col("previous_offset"))
        .select(
            "partition",
            "offset",
            "previous_offset",
            "consumer",
            "consumer_session",
            "generation",
            "commit",
            "trigger",
            "committed_ms",
        )
    )


def derive(
    consumer_ledger: DataFrame, polls: DataFrame, commits: DataFrame
) -> dict[str, DataFrame]:
    """Every consumer anomaly table, by name (the names of :data:`CONSUMER_ANOMALIES`), from the
    consumer ledger, the polls (:func:`eoslab.verify.consumer.ledger.build_polls`) and the
    consumption ledger's commit rows."""
    effects = _kind(consumer_ledger, EFFECT)
    polled = _polled(polls)
    tables = {
        "unprocessed": unprocessed(consumer_ledger),
        "redelivered": redelivered(consumer_ledger),
        "effect_duplicate": duplicates(effects, EFFECT_SCOPE),
        "effect_reorder": reorders(
            effects.where(sf.col(EFFECT_SCOPE.occurrence) == 1), EFFECT_SCOPE
        ),
        "effect_lost": effect_lost(consumer_ledger),
        "poll_skip": poll_skips(polled),
        "nonmonotonic_poll": nonmonotonic_polls(polled),
        "watermark_regression": watermark_regressions(polls),
        "offset_regression": offset_regressions(commits),
        "inconsistent_offset": inconsistent_offsets(polls),
    }
    return {name: tables[name] for name in CONSUMER_ANOMALIES}

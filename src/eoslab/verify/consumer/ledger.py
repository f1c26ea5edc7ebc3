"""The consumer ledger: every record of the log beside every processing of it (the consumption
ledger's ``processed`` rows) and every effect it left in the sink (``effects`` rows), laid out
for the windows of the consumer half.

Three kinds of rows are unioned and shuffled **once**, by producer session and key, and sorted
within each Spark partition by :data:`LAYOUT` — (session, key, key_seq, partition, offset,
apply_order, processed_ms, consumer_session, n):

- ``record``: a record of the log, from the (cached) producer ledger: the topic is not read
  twice. A foreign record keeps its partition and offset, its value's fields are null;
- ``processed``: a processing of a record by a consumer session (``effect`` applied, duplicate
  or foreign);
- ``effect``: an effect in the sink, at the partition and offset its consumer read it from.

Why (session, key): the effect checks need a message's effects together (its identity within
its key stream is (session, key, key_seq), as (session, partition, seq) is within its partition:
``message_id`` names the same message) and a key stream's effects together (their order in the
sink is per key, whatever partition a key's records are in). Every row about one record carries
its value's session, key and key_seq, so the same clustering gathers a record's rows as well;
the per-record windows are partitioned by (session, key, key_seq, partition, offset), which
for a record of the run is its (partition, offset). Foreign records and their processings (no
session, no key) all land in one Spark partition, where (partition, offset) tells them apart.

So a record, then its processings in processing order, then its effects in apply order follow
one another, and a message's copies follow one another in log order: every window of the
consumer half is partitioned and ordered as the rows already are, none shuffles or sorts (but
for the streams whose effects are out of order, see :func:`eoslab.verify.streams.reorders`).
The committed offsets are a few rows, reduced beforehand (:func:`committed_offsets`); they
enter as a literal map per partition, not a join.

A record matches its processings by the identity its value gives. The consumer and the checker
read it alike for every record the workload writes; a record one of them calls foreign and the
other not (a value naming another partition than its own, which the consumer does not check; a
record key other than the value's, which Spark does not check) shows as unprocessed beside a
processing of no record of the log (``processed_not_in_log`` in the metrics).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from eoslab.message import RECORD_FIELDS
from eoslab.verify.streams import KEY_IDENTITY, KEY_STREAM

RECORD = "record"
PROCESSED = "processed"
EFFECT = "effect"

RECORD_AT = (*KEY_IDENTITY, "partition", "offset")
"""One record of the log: its place, with the identity its value gives (see the docstring)."""
PROCESSING_ORDER = ("apply_order", "processed_ms", "consumer_session", "n")
"""Within a record: the record row, its processings by time (then session and number: ``n``
orders one session's), then its effects by apply order (null sorts first)."""
LAYOUT = (*RECORD_AT, *PROCESSING_ORDER)

_RECORD_ONLY = {"reason": "string"}
_PROCESSED_ONLY = {"n": "bigint", "effect": "string", "processed_ms": "bigint"}
_EFFECT_ONLY = {"apply_order": "bigint", "message_id": "string", "command": "string"}
_CONSUMER = {"consumer": "int", "consumer_session": "string", "generation": "int"}
ROW_COLUMNS = (
    "kind",
    *RECORD_FIELDS,
    "offset",
    *_RECORD_ONLY,
    *_CONSUMER,
    *_PROCESSED_ONLY,
    *_EFFECT_ONLY,
)
CONSUMER_LEDGER_COLUMNS = (
    *ROW_COLUMNS,
    "committed_offset",
    "in_log",
    "processings",
    "landed",
    "delivery",
    "first_processed_by",
    "effect_occurrence",
    "message_landed",
    "message_delivery",
)
"""Per row: ``kind`` (record, processed, effect) and its columns (null where they are not its
kind's; ``message_id`` is the processing's or the effect's, null on record rows); the committed
offset of its partition (null: never committed); per record, on each of its rows: ``in_log`` (1:
in the log), ``processings`` and ``landed`` (effects read from it); on processed rows
``delivery`` (1, 2, ...: the processings of the record in order) and the session of the first;
on effect rows ``effect_occurrence`` (1, 2, ...: a message's effects, in the log order of the
copy they were read from, then apply order). Per message, whichever copy: ``message_landed`` on
each of its rows (its effects in the sink) and, on processed rows, ``message_delivery`` (1, 2,
...: its processings, in the log order of the copy processed, then processing order); both
null on the rows of foreign records."""


def _nulls(columns: Mapping[str, str]) -> list[Column]:
    return [sf.lit(None).cast(kind).alias(name) for name, kind in columns.items()]


def _kind(kind: str) -> Column:
    return sf.col("kind") == kind


def committed_offsets(commits: DataFrame) -> dict[int, int]:
    """Partition -> the highest offset a successful commit of the run set (a record below it
    was, at some point, declared consumed by the group)."""
    rows = commits.where(sf.col("error").isNull()).groupBy("partition").agg(sf.max("offset"))
    return {int(p): int(offset) for p, offset in rows.collect()}


def _committed(committed: Mapping[int, int]) -> Column:
    """The committed offset of the row's partition, from a literal map."""
    if not committed:
        return sf.lit(None).cast("bigint")
    pairs = sorted(committed.items())
    by_partition = sf.create_map(
        *(c for p, o in pairs for c in (sf.lit(p).cast("int"), sf.lit(o).cast("bigint")))
    )
    return sf.try_element_at(by_partition, sf.col("partition"))


def build_consumer_ledger(
    ledger: DataFrame,
    processed: DataFrame,
    effects: DataFrame,
    committed: Mapping[int, int],
) -> DataFrame:
    """The consumer ledger of a run (see the module docstring) from its producer ledger
    (:func:`eoslab.verify.producer.ledger.build_ledger`), the processed rows of the consumption
    ledger, the sink's effects (:func:`eoslab.verify.consumer.consumption.read_effects`) and the
    committed offsets (:func:`committed_offsets`)."""
    records = ledger.where(sf.col("offset").isNotNull()).select(
        sf.lit(RECORD).alias("kind"),
        *RECORD_FIELDS,
        "offset",
        *_RECORD_ONLY,
        *_nulls(_CONSUMER),
        *_nulls(_PROCESSED_ONLY),
        *_nulls(_EFFECT_ONLY),
    )
    processings = processed.select(
        sf.lit(PROCESSED).alias("kind"),
        *RECORD_FIELDS,
        "offset",
        *_nulls(_RECORD_ONLY),
        *_CONSUMER,
        *_PROCESSED_ONLY,
        *_nulls({"apply_order": "bigint"}),
        "message_id",
        *_nulls({"command": "string"}),
    )
    landed = effects.select(
        sf.lit(EFFECT).alias("kind"),
        *RECORD_FIELDS,
        "offset",
        *_nulls(_RECORD_ONLY),
        *_CONSUMER,
        *_nulls(_PROCESSED_ONLY),
        *_EFFECT_ONLY,
    )
    rows = (
        records.unionByName(processings)
        .unionByName(landed)
        .repartition(*KEY_STREAM)
        .sortWithinPartitions(*LAYOUT)
    )
    record = Window.partitionBy(*RECORD_AT)
    in_order = record.orderBy(*PROCESSING_ORDER).rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    message = Window.partitionBy(*KEY_IDENTITY).orderBy("partition", "offset", "apply_order")
    message_copies = message.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole_message = message.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    processing = _kind(PROCESSED)
    of_the_run = sf.col("session_id").isNotNull()
    return rows.select(
        *ROW_COLUMNS,
        _committed(committed).alias("committed_offset"),
        sf.count_if(_kind(RECORD)).over(record).alias("in_log"),
        sf.count_if(processing).over(record).alias("processings"),
        sf.count_if(_kind(EFFECT)).over(record).alias("landed"),
        sf.when(processing, sf.count_if(processing).over(in_order)).alias("delivery"),
        sf.when(
            processing,
            sf.first(sf.when(processing, sf.col("consumer_session")), ignorenulls=True).over(
                in_order
            ),
        ).alias("first_processed_by"),
        sf.when(_kind(EFFECT), sf.count("apply_order").over(message_copies)).alias(
            "effect_occurrence"
        ),
        sf.when(of_the_run, sf.count_if(_kind(EFFECT)).over(whole_message)).alias("message_landed"),
        sf.when(of_the_run & processing, sf.count_if(processing).over(message_copies)).alias(
            "message_delivery"
        ),
    )


POLL_EPOCH = ("partition", "consumer_session", "generation", "assignment")
"""A member's assignment epoch (a consumer session in one generation, KIP-848: member epoch,
and one assignment of the partition by its client's callbacks), per partition: where
processings must rise one record at a time."""
_LOG_AROUND = ("before", "through", "identities")
"""The polls' last columns: the log around a processing's offset, counted when they are built."""
POLL_COLUMNS = (
    *RECORD_FIELDS,
    "offset",
    "message_id",
    "consumer",
    "consumer_session",
    "generation",
    "assignment",
    "n",
    "watermark",
    *_LOG_AROUND,
)
"""The polls' columns: a processing (who processed which record, in which epoch, its number
among its session's processings, the high watermark its client's fetches last told) and the log
around its offset: ``before``, the records of its
partition below its offset; ``through``, those at or below it; ``identities``, how many
different records of the run (by the identity their values give) its place was found holding,
by the log (the checker's read) and by every processing of it: more than one is an
inconsistent offset."""


_PROCESSING_COLUMNS = (
    *(c for c in RECORD_FIELDS if c != "partition"),
    "message_id",
    "consumer",
    "consumer_session",
    "generation",
    "assignment",
    "n",
    "watermark",
)
"""A processing's columns beside its place (partition, offset)."""


def _identity() -> Column:
    """A record of the run's identity, (session, key, key_seq) as one string; null for a foreign
    record or a processing of one (the consumer and the checker may class a damaged record
    differently, and a record without identity holds no message to disagree about)."""
    return sf.when(
        sf.col("session_id").isNotNull(),
        sf.concat_ws(":", "session_id", "key", sf.col("key_seq").cast("string")),
    ).alias("identity")


def build_polls(ledger: DataFrame, processed: DataFrame) -> DataFrame:
    """What each consumer saw, laid out for the poll checks: every processing of the consumption
    ledger, with the log's records around its offset (``before``, ``through``: see
    :data:`POLL_COLUMNS`), clustered by Kafka partition and sorted by (partition,
    consumer_session, generation, assignment, n), so that an epoch's processings follow one another in
    processing order. The records between two processings at offsets ``a < b`` are then
    ``before(b) - through(a)``: offsets without a record (a transaction marker) count for nothing.
    The same window over a place counts the records of the run found there (``identities``).

    Its cost, apart from the consumer ledger's (whose clustering, by producer session and key,
    spreads a consumer's processings of a partition everywhere): one exchange, of the processed
    rows and the log's (partition, offset), and two sorts — by offset to count the records, then
    by epoch."""
    records = ledger.where(sf.col("offset").isNotNull()).select(
        "partition", "offset", sf.lit(True).alias("is_record"), _identity()
    )
    processings = processed.select(
        "partition", "offset", sf.lit(False).alias("is_record"), *_PROCESSING_COLUMNS, _identity()
    )
    rows = (
        processings.unionByName(records, allowMissingColumns=True)
        .repartition("partition")
        .sortWithinPartitions("partition", "offset")
    )
    up_to = (
        Window.partitionBy("partition")
        .orderBy("offset")
        .rangeBetween(Window.unboundedPreceding, Window.currentRow)
    )
    at = Window.partitionBy("partition", "offset")
    counted = rows.select(
        "*",
        sf.count_if("is_record").over(up_to).alias("through"),
        sf.count_if("is_record").over(at).alias("at"),
        sf.size(sf.collect_set("identity").over(at)).alias("identities"),
    )
    return (
        counted.where(~sf.col("is_record"))
        .select(
            *(sf.col(c) for c in POLL_COLUMNS[: -len(_LOG_AROUND)]),
            sf.expr("through - at").alias("before"),
            *_LOG_AROUND[1:],
        )
        .sortWithinPartitions(*POLL_EPOCH, "n")
    )

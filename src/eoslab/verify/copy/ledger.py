"""The copy ledger: every input record of the run beside every copy of it the copier's output
topic shows a read_committed consumer, for the windows of the copy checks
(consume-transform-produce, issue 21).

Three kinds of rows are unioned and shuffled **once**, by producer session, and sorted within
each Spark partition by :data:`LAYOUT` — (session, partition, seq, offset, row_kind):

- ``row_kind`` 0, a **sent** record: one record of one transaction of the producers' ledger,
  with its transaction's ``outcome``; ``offset`` is null;
- ``row_kind`` 1, a **visible** input: a record of the run the read_committed reader read from
  the input topic, at ``offset``;
- ``row_kind`` 2, a **copy**: a record of the output topic read read_committed, at
  (``out_partition``, ``out_offset``), made by copier session ``copier_session`` in its batch
  ``copier_txn`` from the input at (``partition``, ``offset``) whose value names the record
  (``session_id``, ``seq``).

Every row carries ``committed_offset``: the offset the copier group committed for its partition
at the end (null where it committed none). A record's identity is (session, partition, seq), an
input's place adds its ``offset``: both windows are partitioned by a superset of the clustering,
so neither shuffles (the layout of :mod:`eoslab.verify.transactions.ledger`, whose records it
shares).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from eoslab.message import COPY_FIELD_INDEX, COPY_FIELDS, COPY_TAG, FIELD_INDEX, SEPARATOR
from eoslab.verify.streams import IDENTITY

SENT = 0
VISIBLE = 1
COPY = 2
PLACE = (*IDENTITY, "offset")
LAYOUT = (*PLACE, "row_kind")
COPY_COLUMNS = ("out_partition", "out_offset", "copier_session", "copier_txn")
COLUMNS = ("row_kind", *PLACE, "outcome", *COPY_COLUMNS, "committed_offset")


def _part(parts: Column, fields: Mapping[str, int], name: str) -> Column:
    return sf.try_element_at(parts, sf.lit(fields[name] + 1))


def parse_copies(raw: DataFrame, run_id: str) -> DataFrame:
    """The copies among the output topic's records (Kafka source rows, or their kept copy):
    where each is, who made it, and the input it names; records that are not copies of this
    run's messages are left out."""
    wrapper = sf.split(sf.col("value").cast("string"), "\\" + SEPARATOR, len(COPY_FIELDS))
    copies = raw.select(
        sf.col("partition").cast("int").alias("out_partition"),
        sf.col("offset").alias("out_offset"),
        wrapper.alias("wrapper"),
    ).select(
        "out_partition",
        "out_offset",
        _part(sf.col("wrapper"), COPY_FIELD_INDEX, "tag").alias("tag"),
        _part(sf.col("wrapper"), COPY_FIELD_INDEX, "in_partition").try_cast("int").alias("in_p"),
        _part(sf.col("wrapper"), COPY_FIELD_INDEX, "in_offset").try_cast("bigint").alias("offset"),
        _part(sf.col("wrapper"), COPY_FIELD_INDEX, "copier_session").alias("copier_session"),
        _part(sf.col("wrapper"), COPY_FIELD_INDEX, "txn").try_cast("bigint").alias("copier_txn"),
        sf.split(_part(sf.col("wrapper"), COPY_FIELD_INDEX, "value"), "\\" + SEPARATOR).alias(
            "parts"
        ),
    )
    message = copies.select(
        "*",
        _part(sf.col("parts"), FIELD_INDEX, "run_id").alias("run_id"),
        _part(sf.col("parts"), FIELD_INDEX, "session_id").alias("session_id"),
        _part(sf.col("parts"), FIELD_INDEX, "partition").try_cast("int").alias("partition"),
        _part(sf.col("parts"), FIELD_INDEX, "seq").try_cast("bigint").alias("seq"),
    )
    ours = (
        (sf.col("tag") == COPY_TAG)
        & (sf.col("run_id") == run_id)
        & (sf.col("partition") == sf.col("in_p"))
        & sf.col("offset").isNotNull()
        & sf.col("seq").isNotNull()
    )
    return message.where(sf.coalesce(ours, sf.lit(False))).select(*PLACE, *COPY_COLUMNS)


def build_copy_ledger(
    transactions: DataFrame,
    visible: DataFrame,
    copies: DataFrame,
    committed: Mapping[int, int],
) -> DataFrame:
    """The sent, visible and copy rows, clustered by session and sorted by :data:`LAYOUT`.
    ``transactions``: the producers' transaction ledger; ``visible``: the read_committed
    reader's reads of the input; ``copies``: :func:`parse_copies`; ``committed``: the copier
    group's committed offset per partition."""
    nothing = {
        "offset": "bigint",
        "outcome": "string",
        "out_partition": "int",
        "out_offset": "bigint",
        "copier_session": "string",
        "copier_txn": "bigint",
    }

    def rows(frame: DataFrame, kind: int) -> DataFrame:
        present = set(frame.columns)
        return frame.select(
            sf.lit(kind).alias("row_kind"),
            *(
                sf.col(c) if c in present else sf.lit(None).cast(nothing[c]).alias(c)
                for c in COLUMNS[1:-1]
            ),
        )

    sent = transactions.select(
        "session_id", "outcome", sf.explode("records").alias("record")
    ).select("session_id", "record.partition", "record.seq", "outcome")
    read = visible.where(sf.col("session_id").isNotNull()).select(*PLACE)
    pairs = [x for p, o in sorted(committed.items()) for x in (sf.lit(p), sf.lit(o).cast("bigint"))]
    committed_offset = (
        sf.try_element_at(sf.create_map(*pairs), sf.col("partition"))
        if pairs
        else sf.lit(None).cast("bigint")
    )
    return (
        rows(sent, SENT)
        .unionByName(rows(read, VISIBLE))
        .unionByName(rows(copies, COPY))
        .withColumn("committed_offset", committed_offset)
        .repartition("session_id")
        .sortWithinPartitions(*LAYOUT)
    )

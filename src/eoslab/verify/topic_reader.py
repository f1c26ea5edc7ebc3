"""Read a run's log — its topic through Spark's Kafka source, or the copy the run directory
keeps — and parse the workload's messages.

The first check of a run reads the topic and keeps what it read in the run directory
(``topic/``, :func:`read_log`); every later check reads that copy, so a run re-checks to the
same verdict after its topic is gone (pruned, or the lab rebuilt), on another machine, or
archived. Parsing is plain SQL (``split`` and ``try_cast``), never a Python UDF: it stays in the
JVM and scales with the cluster. Every record keeps its Kafka partition and offset, so that
each anomaly can be located in the log.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from eoslab.admin import topic_exists
from eoslab.message import FIELD_INDEX, FIELDS, FORMAT_TAG, RECORD_FIELDS, SEPARATOR
from eoslab.rundir import Isolation, RunDir, RunInfo
from eoslab.verify.spark_session import spark_path

RECORD_COLUMNS = (*RECORD_FIELDS, "offset")
"""A run record: who sent it and its sequences (from the value), where it is (Kafka)."""

FETCH_BYTES = 16 * 1024 * 1024
"""Per fetch: the Java client's 1 MiB per partition halves the read rate of small records."""


def read_raw(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    partitions: int,
    transactional: bool = False,
    *,
    isolation: Isolation = "read_uncommitted",
) -> DataFrame:
    """Every record of every partition, earliest to the latest offset at read time, as a
    consumer at ``isolation`` sees them (read_uncommitted, the default: aborted transactions'
    records included; read_committed: up to the last stable offset, without them).

    A topic written in transactions has offsets without a record (the commit and abort
    markers), which Spark's source takes for data loss: for such a topic it is told to skip
    them. A record really missing is still found, by the checks (a ``lost`` record)."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: list(range(partitions))}))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("failOnDataLoss", "false" if transactional else "true")
        .option("kafka.isolation.level", isolation)
        .option("kafka.max.partition.fetch.bytes", str(FETCH_BYTES))
        .option("kafka.fetch.max.bytes", str(FETCH_BYTES))
        .load()
    )


class TopicGoneError(LookupError):
    """The run's topic is not on the cluster (deleted, or the lab rebuilt) and is needed."""


SNAPSHOT_COLUMNS = ("partition", "offset", "key", "value", "timestamp")
"""What the run directory keeps of each Kafka record (everything the checks read, and more)."""


def require_topic(
    run: RunDir, info: RunInfo, *, bootstrap: str | None = None, from_topic: bool = False
) -> str | None:
    """Where a check reads the topic (``bootstrap``, else run.json's), or None when it reads
    the run directory's copy; :class:`TopicGoneError` (saying where the copy is, if any) when the
    topic is needed and gone. Cheap (one metadata request): asked before a Spark starts."""
    if not from_topic and run.has_topic_snapshot:
        return None
    bootstrap = bootstrap or info.bootstrap
    if not topic_exists(bootstrap, info.topic):
        kept = (
            f"the copy of its log in {run.topic_dir} is there: check without --from-topic"
            if run.has_topic_snapshot
            else f"and {run.topic_dir} holds no copy of its log (the run was never checked)"
        )
        raise TopicGoneError(f"topic {info.topic} is not on {bootstrap}; {kept}")
    return bootstrap


def read_log(
    spark: SparkSession,
    run: RunDir,
    info: RunInfo,
    *,
    bootstrap: str | None = None,
    from_topic: bool = False,
) -> DataFrame:
    """The run's log: the copy its run directory keeps, or (the first time, or ``from_topic``)
    the topic read from ``bootstrap`` (run.json's by default), kept as that copy first."""
    source = require_topic(run, info, bootstrap=bootstrap, from_topic=from_topic)
    return _kept(
        spark,
        run.topic_dir,
        source,
        info.topic,
        info.partitions,
        transactional=info.transactions is not None,
    )


def read_copies(
    spark: SparkSession,
    run: RunDir,
    info: RunInfo,
    *,
    bootstrap: str | None = None,
    from_topic: bool = False,
) -> DataFrame:
    """The copier's output topic as a read_committed consumer reads it (run.json's
    ``copier``): kept in the run directory (``copy-topic/``) as the log is."""
    if info.copier is None:
        raise ValueError(f"run {info.run_id} had no copier")
    source = None if run.has_copy_snapshot and not from_topic else bootstrap or info.bootstrap
    return _kept(
        spark,
        run.copy_topic_dir,
        source,
        info.copier.output_topic,
        info.partitions,
        transactional=True,
        isolation="read_committed",
    )


def _kept(
    spark: SparkSession,
    kept: Path,
    bootstrap: str | None,
    topic: str,
    partitions: int,
    *,
    transactional: bool,
    isolation: Isolation = "read_uncommitted",
) -> DataFrame:
    """The copy of ``topic`` kept in folder ``kept``; with a ``bootstrap``, read from the topic
    and kept first. The copy is written beside, then moved in place: a check that dies halfway
    leaves none."""
    if bootstrap is not None:
        raw = read_raw(spark, bootstrap, topic, partitions, transactional, isolation=isolation)
        partial = kept.with_name(f".{kept.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        raw.select(*SNAPSHOT_COLUMNS).write.parquet(spark_path(partial))
        shutil.rmtree(kept, ignore_errors=True)
        partial.rename(kept)
    return spark.read.parquet(spark_path(kept))


def _field(parts: Column, name: str) -> Column:
    return sf.try_element_at(parts, sf.lit(FIELD_INDEX[name] + 1))


def classify(raw: DataFrame, run_id: str) -> DataFrame:
    """Parse every raw Kafka row; ``reason`` is null for this run's records and says why any
    other row is foreign: another format, another run, or a value naming another partition than
    the one the record is in."""
    parts = sf.split(sf.col("value").cast("string"), "\\" + SEPARATOR)
    parsed = raw.select(
        sf.col("partition").cast("int").alias("partition"),
        sf.col("offset"),
        sf.col("value").cast("string").alias("text"),
        parts.alias("parts"),
    ).select(
        "partition",
        "offset",
        "text",
        sf.size("parts").alias("field_count"),
        _field(sf.col("parts"), "tag").alias("tag"),
        _field(sf.col("parts"), "run_id").alias("run_id"),
        _field(sf.col("parts"), "session_id").alias("session_id"),
        _field(sf.col("parts"), "producer").try_cast("int").alias("producer"),
        _field(sf.col("parts"), "partition").try_cast("int").alias("value_partition"),
        _field(sf.col("parts"), "seq").try_cast("bigint").alias("seq"),
        _field(sf.col("parts"), "key").alias("key"),
        _field(sf.col("parts"), "key_seq").try_cast("bigint").alias("key_seq"),
    )
    well_formed = (
        (sf.col("tag") == FORMAT_TAG)
        & (sf.col("field_count") == len(FIELDS))
        & sf.col("producer").isNotNull()
        & sf.col("value_partition").isNotNull()
        & sf.col("seq").isNotNull()
        & sf.col("key_seq").isNotNull()
    )
    reason = (
        sf.when(sf.col("text").isNull(), sf.lit("null value"))
        .when(~sf.coalesce(well_formed, sf.lit(False)), sf.lit("not an eos1 message"))
        .when(sf.col("run_id") != run_id, sf.lit("another run"))
        .when(sf.col("value_partition") != sf.col("partition"), sf.lit("in another partition"))
    )
    return parsed.withColumn("reason", reason).select(
        *RECORD_COLUMNS,
        "reason",
        # a foreign value may be any bytes: valid UTF-8 (U+FFFD for the rest), so every Parquet
        # reader can read the table
        sf.when(
            sf.col("reason").isNotNull(), sf.substring(sf.make_valid_utf8("text"), 1, 80)
        ).alias("value_head"),
    )

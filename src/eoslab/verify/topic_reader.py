"""Read a run's log — its topic through Spark's Kafka source, or the copy the run directory
keeps — and parse the workload's messages.

The first check of a run reads the topic and keeps what it read in the run directory
(``topic/``, :func:`read_kept`); every later check reads that copy, so a run re-checks to the
same verdict after its topic is gone (pruned, or the lab rebuilt), on another machine, or
archived. Parsing is plain SQL (``split`` and ``try_cast``), never a Python UDF: it stays in the
JVM and scales with the cluster. Every record keeps its Kafka partition and offset, so that
each anomaly can be located in the log.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from eoslab.admin import topic_exists
from eoslab.message import (
    CHECKSUM_DIGITS,
    FIELD_COUNTS,
    FIELD_INDEX,
    FORMAT_TAG,
    RECORD_FIELDS,
    SEPARATOR,
)
from eoslab.rundir import CORRUPT, MISPLACED, Isolation, RunDir, RunInfo
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


@dataclass(frozen=True)
class KeptTopic:
    """A topic of a run that the run directory keeps a copy of: the log, or the copier's
    output topic (read read_committed, as a downstream consumer reads it)."""

    topic: str
    folder: Path
    isolation: Isolation
    transactional: bool

    @property
    def is_kept(self) -> bool:
        """Whether the copy is complete (a Spark write's ``_SUCCESS``)."""
        return (self.folder / "_SUCCESS").is_file()

    @classmethod
    def log(cls, run: RunDir, info: RunInfo) -> KeptTopic:
        transactional = info.transactions is not None
        return cls(info.topic, run.topic_dir, "read_uncommitted", transactional)

    @classmethod
    def copies(cls, run: RunDir, info: RunInfo) -> KeptTopic:
        if info.copier is None:
            raise ValueError(f"run {info.run_id} had no copier")
        return cls(info.copier.output_topic, run.copy_topic_dir, "read_committed", True)


def kept_topics(run: RunDir, info: RunInfo) -> list[KeptTopic]:
    """The topics a check of the run reads: the log, and the copier's output if it had one."""
    return [KeptTopic.log(run, info)] + (
        [] if info.copier is None else [KeptTopic.copies(run, info)]
    )


def require_topic(
    run: RunDir, info: RunInfo, *, bootstrap: str | None = None, from_topic: bool = False
) -> str | None:
    """Where a check reads the run's topics (``bootstrap``, else run.json's), or None when it
    reads the run directory's copies; :class:`TopicGoneError` (saying where the copy is, if any)
    when a topic is needed and gone. Cheap (a metadata request each): asked before a Spark
    starts."""
    sources = {_source(kept, info, bootstrap, from_topic) for kept in kept_topics(run, info)}
    return next((source for source in sources if source is not None), None)


def _source(kept: KeptTopic, info: RunInfo, bootstrap: str | None, from_topic: bool) -> str | None:
    """Where ``kept`` is read: None for its copy, else the cluster (checked to hold it)."""
    if not from_topic and kept.is_kept:
        return None
    return _cluster(kept, info, bootstrap)


def _cluster(kept: KeptTopic, info: RunInfo, bootstrap: str | None) -> str:
    """Where ``kept``'s topic is read from the cluster (``bootstrap``, else where the run
    wrote it), checked to hold it."""
    bootstrap = bootstrap or info.bootstrap
    if not topic_exists(bootstrap, kept.topic):
        where = (
            f"the copy of it in {kept.folder} is there: check without --from-topic"
            if kept.is_kept
            else f"and {kept.folder} holds no copy of it (the run was never checked)"
        )
        raise TopicGoneError(f"topic {kept.topic} is not on {bootstrap}; {where}")
    return bootstrap


def read_kept(
    spark: SparkSession,
    kept: KeptTopic,
    info: RunInfo,
    *,
    bootstrap: str | None = None,
    from_topic: bool = False,
) -> DataFrame:
    """A run's topic: the copy its run directory keeps, or (the first time, or ``from_topic``)
    the topic read from ``bootstrap`` (run.json's by default) at the topic's isolation, kept
    as that copy first. The copy is written beside, then moved in place: a check that dies
    halfway leaves none."""
    source = _source(kept, info, bootstrap, from_topic)
    if source is not None:
        _keep(spark, kept, info, source)
    return spark.read.parquet(spark_path(kept.folder))


def keep_topics(spark: SparkSession, run: RunDir, info: RunInfo) -> list[str]:
    """Read each of the run's topics that its directory keeps no copy of yet, from where the
    run wrote it, and keep it (what a first check does, done before it); the topics kept."""
    missing = [kept for kept in kept_topics(run, info) if not kept.is_kept]
    for kept in missing:
        _keep(spark, kept, info, _cluster(kept, info, None))
    return [kept.topic for kept in missing]


def _keep(spark: SparkSession, kept: KeptTopic, info: RunInfo, source: str) -> None:
    """``kept``'s topic read from ``source`` at its isolation, kept as the run's copy: written
    beside, then moved in place (a read that dies halfway leaves none)."""
    raw = read_raw(
        spark, source, kept.topic, info.partitions, kept.transactional, isolation=kept.isolation
    )
    partial = kept.folder.with_name(f".{kept.folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    raw.select(*SNAPSHOT_COLUMNS).write.parquet(spark_path(partial))
    shutil.rmtree(kept.folder, ignore_errors=True)
    partial.rename(kept.folder)


def _field(parts: Column, name: str) -> Column:
    return sf.try_element_at(parts, sf.lit(FIELD_INDEX[name] + 1))


FOREIGN_FORMAT = "not a workload message"
FOREIGN_RUN = "another run"


def _checksum_fails(value: Column, checksum: Column) -> Column:
    """Whether a version-2 value's checksum field is not the CRC-32 of the bytes before it
    (:mod:`eoslab.message`): Spark's ``crc32`` on the value's own bytes, the field read as hex."""
    before = sf.octet_length(value) - sf.octet_length(checksum) - sf.lit(len(SEPARATOR))
    computed = sf.crc32(sf.substring(value, sf.lit(1), before))
    stated = sf.conv(checksum, 16, 10).try_cast("bigint")
    return (sf.length(checksum) != CHECKSUM_DIGITS) | ~sf.equal_null(computed, stated)


def classify(raw: DataFrame, run_id: str) -> DataFrame:
    """Parse every raw Kafka row; ``reason`` is null for this run's records and says why any
    other row is not one: foreign (another format, another run), or the run's but ``corrupt``
    (a version-2 value that fails its checksum) or ``misplaced`` (a value naming another
    partition than the one the record is in): the ``reason`` is then the anomaly's name
    (:data:`eoslab.rundir.RUN_FLAWS`)."""
    parts = sf.split(sf.col("value").cast("string"), "\\" + SEPARATOR)
    parsed = raw.select(
        sf.col("partition").cast("int").alias("partition"),
        sf.col("offset"),
        sf.col("value"),
        sf.col("value").cast("string").alias("text"),
        parts.alias("parts"),
    ).select(
        "partition",
        "offset",
        "value",
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
        _field(sf.col("parts"), "checksum").alias("checksum"),
    )
    fields = sf.lit(None).cast("int")
    for tag, count in FIELD_COUNTS.items():
        fields = sf.when(sf.col("tag") == tag, sf.lit(count)).otherwise(fields)
    well_formed = (
        (sf.col("field_count") == fields)
        & sf.col("producer").isNotNull()
        & sf.col("value_partition").isNotNull()
        & sf.col("seq").isNotNull()
        & sf.col("key_seq").isNotNull()
    )
    signed = sf.col("tag") == FORMAT_TAG
    reason = (
        sf.when(sf.col("text").isNull(), sf.lit("null value"))
        .when(~sf.coalesce(well_formed, sf.lit(False)), sf.lit(FOREIGN_FORMAT))
        .when(sf.col("run_id") != run_id, sf.lit(FOREIGN_RUN))
        .when(signed & _checksum_fails(sf.col("value"), sf.col("checksum")), sf.lit(CORRUPT))
        .when(sf.col("value_partition") != sf.col("partition"), sf.lit(MISPLACED))
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

"""The consumer half's inputs: the consumption ledger (Parquet) and the sink's effects (JDBC).

Spark reads the effects in one JDBC query, from where run.json's ``consumption.sink`` says
(:func:`eoslab.verify.consumer.sink_location.jdbc_sink`); the drivers come with the checker's jars
(:func:`eoslab.verify.spark_session.checker_jars`), so the in-process session and the
spark-submit job read the sink alike.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from eoslab.rundir import COMMITS_SCHEMA, PROCESSED_SCHEMA, RunDir
from eoslab.verify.consumer.sink_location import JdbcSink
from eoslab.verify.spark_session import read_dataset

EFFECT_COLUMNS = {
    "apply_order": "bigint",
    "message_id": "string",
    "producer_session": "string",
    "producer": "int",
    "seq": "bigint",
    "kafka_partition": "int",
    "kafka_offset": "bigint",
    "key": "string",
    "key_seq": "bigint",
    "command": "string",
    "consumer": "int",
    "consumer_session": "string",
    "generation": "int",
    "applied_ms": "bigint",
}
"""The ``effects`` columns the checker reads
(:data:`eoslab.workload.consumer.sink.database.SCHEMA`), with Spark's types for them: SQLite
reports the types it stores, not the ones declared."""
LEDGER_NAMES = {
    "producer_session": "session_id",
    "kafka_partition": "partition",
    "kafka_offset": "offset",
}
"""Effect columns renamed to the checker's record columns: the producer session is the value's
session; the partition and offset are where the consumer read the record."""


def read_effects(spark: SparkSession, sink: JdbcSink) -> DataFrame:
    """Every row of the sink's ``effects`` table, with the checker's column names and types."""
    frame = (
        spark.read.format("jdbc")
        .option("url", sink.url)
        .options(**sink.properties)
        .option("query", f"SELECT {', '.join(EFFECT_COLUMNS)} FROM effects")
        .option("customSchema", ", ".join(f"{c} {t}" for c, t in EFFECT_COLUMNS.items()))
        .load()
    )
    return frame.select(*(sf.col(c).alias(LEDGER_NAMES.get(c, c)) for c in EFFECT_COLUMNS))


def read_processed(spark: SparkSession, run: RunDir) -> DataFrame:
    """The consumption ledger's processed rows (PROCESSED_SCHEMA)."""
    return read_dataset(spark, run.processed_dir, PROCESSED_SCHEMA)


def read_commits(spark: SparkSession, run: RunDir) -> DataFrame:
    """The consumption ledger's commit rows (COMMITS_SCHEMA)."""
    return read_dataset(spark, run.commits_dir, COMMITS_SCHEMA)

"""Spark's Kafka source (the Java client inside Spark) reads a topic from the reference broker."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from eoslab.admin import create_topic
from eoslab.runtime import smoke
from eoslab.runtime.local import LocalRuntime
from eoslab.verify.topic_reader import read_raw


def test_spark_reads_every_record_of_every_partition(
    lab: LocalRuntime, spark: SparkSession
) -> None:
    bootstrap = lab.config.refbroker_bootstrap
    create_topic(bootstrap, "spark-source", partitions=3, replication=1)
    ledger = smoke.produce(bootstrap, "spark-source", partitions=3, count=900)

    rows = (
        read_raw(spark, bootstrap, "spark-source", partitions=3)
        .select("partition", "offset", sf.col("value").cast("string").alias("value"))
        .collect()
    )

    assert len(rows) == 900
    read = {(r.partition, int(r.value.split(":")[1])): r.offset for r in rows}
    assert read == ledger.acked  # each record at the offset its ack named

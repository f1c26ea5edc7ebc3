"""The checker's SparkSession: local, small, loopback-only, with its connectors on the path (Spark's
Kafka source for the topic, the JDBC drivers for the consumer half's sink).

The checker reads hundreds to millions of records on a shared 2-core machine: its ledger
shuffle is cut in 16 partitions (at 8M records it built in 68 s against 85 s with 4; adaptive
execution merges them back for small runs, instead of 200 near-empty tasks), and the UI is off
because nobody watches it. The driver binds loopback like every other lab process.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from eoslab.settings import HOST, spark_jars

DEFAULT_MASTER = "local[2]"
SHUFFLE_PARTITIONS = 16
DRIVER_MEMORY = "4g"
"""Local mode runs the executors inside the driver: millions of records are cached there."""
APP_NAME = "eoslab-verify"
SESSION_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
    "spark.default.parallelism": str(SHUFFLE_PARTITIONS),
    "spark.driver.host": HOST,
    "spark.driver.bindAddress": HOST,
    "spark.sql.session.timeZone": "UTC",
}
"""Every checker session's settings, whether built here or passed to spark-submit."""


def checker_jars() -> list[str]:
    """Every jar the checker needs, fetched by `make setup` (services/spark/pom.xml): Spark's
    Kafka source and the sink's JDBC drivers (SQLite, PostgreSQL), with their dependencies."""
    jars = sorted(str(jar) for jar in spark_jars().glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no checker jars in {spark_jars()}; run `make setup`")
    return jars


def under_spark_submit() -> bool:
    """Whether spark-submit started this Python (it then owns the JVM and the master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(master: str | None = None) -> SparkSession:
    """The session the checker runs in (an already running one is reused with these settings).

    ``master`` defaults to spark-submit's under spark-submit, else to ``local[2]``."""
    os.environ.setdefault("SPARK_LOCAL_IP", HOST)  # read when the JVM starts
    builder = SparkSession.builder.appName(APP_NAME)
    if master or not under_spark_submit():
        builder = builder.master(master or DEFAULT_MASTER)
    builder = builder.config("spark.jars", ",".join(checker_jars())).config(
        "spark.driver.memory", DRIVER_MEMORY
    )
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()

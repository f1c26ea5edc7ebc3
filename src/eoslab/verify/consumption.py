"""The consumer half's inputs: the consumption ledger (Parquet) and the sink's effects (JDBC).

run.json's ``consumption.sink`` says where the sink is, as the workload recorded it:

- ``sqlite:<path>``: read with sqlite-jdbc. A relative path is the run directory's; when the
  recorded file is gone but the run directory holds ``sink.sqlite`` (the default sink, in a
  run directory copied elsewhere), that one is read.
- a PostgreSQL URL (``postgresql://user@host:port/db?options=...``), recorded without its
  password: read with PostgreSQL's JDBC driver, the password from the URL if it has one, else
  from ``PGPASSWORD``, the variable libpq and psql read, else the lab's own when the URL is the
  lab's PostgreSQL (``eoslab run --sink lab``); pgjdbc also reads ``~/.pgpass``.
  The URL's query parameters (``options=-csearch_path=...``, ``sslmode``, ...) go to the driver,
  which knows libpq's names for them.

Spark reads the effects in one JDBC query; the drivers come with the checker's jars
(:func:`eoslab.verify.spark_session.checker_jars`), so the in-process session and the
spark-submit job read the sink alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from eoslab.rundir import COMMITS_SCHEMA, PROCESSED_SCHEMA, RunDir
from eoslab.runtime.postgres import lab_password
from eoslab.verify.history import read_dataset
from eoslab.verify.spark_session import spark_path
from eoslab.workload.sink.database import is_postgres

SQLITE_PREFIX = "sqlite:"
SQLITE_DRIVER = "org.sqlite.JDBC"
POSTGRES_DRIVER = "org.postgresql.Driver"
PASSWORD_VARIABLE = "PGPASSWORD"

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
"""The ``effects`` columns the checker reads (:data:`eoslab.workload.sink.database.SCHEMA`), with
Spark's types for them: SQLite reports the types it stores, not the ones declared."""
LEDGER_NAMES = {
    "producer_session": "session_id",
    "kafka_partition": "partition",
    "kafka_offset": "offset",
}
"""Effect columns renamed to the checker's record columns: the producer session is the value's
session; the partition and offset are where the consumer read the record."""


class SinkLocationError(ValueError):
    """run.json's sink is neither ``sqlite:<path>`` nor a PostgreSQL URL, or its file is gone."""


@dataclass(frozen=True)
class JdbcSink:
    """Where Spark's JDBC source reads the sink: a JDBC URL and the driver's properties."""

    url: str
    properties: dict[str, str] = field(default_factory=dict)


def jdbc_sink(sink: str, run_dir: Path, environ: Mapping[str, str] = os.environ) -> JdbcSink:
    """The JDBC location of run.json's ``consumption.sink`` (see the module docstring)."""
    if sink.startswith(SQLITE_PREFIX):
        return JdbcSink(
            f"jdbc:sqlite:{spark_path(_sqlite_file(Path(sink[len(SQLITE_PREFIX) :]), run_dir))}",
            {"driver": SQLITE_DRIVER},
        )
    if not is_postgres(sink):
        raise SinkLocationError(
            f"sink {sink!r}: expected {SQLITE_PREFIX}<path> or a postgresql:// URL"
        )
    parts = urlsplit(sink)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port else ""
    query = f"?{parts.query}" if parts.query else ""
    properties = {"driver": POSTGRES_DRIVER}
    if parts.username:
        properties["user"] = parts.username
    password = parts.password if parts.password is not None else environ.get(PASSWORD_VARIABLE)
    if password is None:
        password = lab_password(parts.hostname, parts.port)
    if password is not None:
        properties["password"] = password
    return JdbcSink(
        f"jdbc:postgresql://{host or 'localhost'}{port}{parts.path or '/'}{query}", properties
    )


def _sqlite_file(path: Path, run_dir: Path) -> Path:
    recorded = path if path.is_absolute() else run_dir / path
    if recorded.is_file():
        return recorded
    default = RunDir(run_dir).sink_sqlite
    if default.is_file():
        return default
    raise SinkLocationError(f"the sink {recorded} does not exist (nor {default})")


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

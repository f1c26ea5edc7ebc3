"""The checker's SparkSession: a client of a warm Spark Connect server (the lab's, or a
cluster's), or a JVM of its own (local, or spark-submit's), with the lab's settings
(:mod:`eoslab.runtime.spark`) either way.

Which one, when nothing says: ``$EOSLAB_SPARK_REMOTE``, else the lab's Spark Connect service
when it is up, else a local JVM.

The workload's ledgers (Parquet datasets: the history, the consumption ledger, the transactions)
are read into it with the contract's schemas (:func:`read_dataset`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator
from pyspark.sql.pandas.types import from_arrow_schema

from eoslab.runtime.health import port_open
from eoslab.runtime.spark import (
    APP_NAME,
    CONNECT_MODE_VARIABLES,
    DEFAULT_MASTER,
    DRIVER_MEMORY,
    SESSION_CONF,
    SMALL_RUN_CONF,
    SMALL_RUN_RECORDS,
    SQL_CONF,
    checker_jars,
)
from eoslab.runtime.topology import LabConfig
from eoslab.settings import HOST, BasePort, spark_remote


def _keep_the_release_pool() -> None:
    """Closing one Spark Connect session no longer shuts down the pool every session of the
    process shares.

    pyspark 4.0.0's ``SparkConnectClient.close()`` (every ``stop()``, and every session's
    ``__del__``, whenever the garbage collector gets to it) shuts down the class-wide pool that
    each session's executions hand their ReleaseExecute calls to. A session closed or collected
    while another one is between taking that pool and submitting to it makes the other's query
    fail "cannot schedule new futures after shutdown" (a check beside the tests' own session,
    two checks at once in one process: SPARK-55406, fixed upstream after the 4.0 line this lab
    is pinned to). The pool is kept for the process's life instead: its threads are idle
    between calls and end with the interpreter; a release a closed session still had queued
    fails on its closed channel, which pyspark logs and the server's timeout cleans up."""

    def keep(cls: type[ExecutePlanResponseReattachableIterator]) -> None:
        del cls

    ExecutePlanResponseReattachableIterator.shutdown = classmethod(keep)  # type: ignore[method-assign,assignment]


_keep_the_release_pool()


def under_spark_submit() -> bool:
    """Whether spark-submit started this Python (it then owns the JVM and the master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def default_remote() -> str | None:
    """The Spark Connect server to use when none is named: ``$EOSLAB_SPARK_REMOTE``, else the
    lab's when it listens; None for a local JVM (and always under spark-submit)."""
    if under_spark_submit():
        return None
    if configured := spark_remote():
        return configured
    lab = LabConfig()
    return (
        lab.spark_remote if lab.with_spark_connect and port_open(lab.spark_connect_port) else None
    )


def answers(remote: str) -> bool:
    """Whether a Spark Connect server listens at ``remote`` (``sc://host:port``): pyspark's
    client retries an unreachable server for minutes, silently, before it fails."""
    parts = urlsplit(remote)
    return port_open(parts.port or BasePort.SPARK_CONNECT, parts.hostname or HOST, timeout_s=2)


def spark_failure(error: PySparkException) -> str:
    """What went wrong in Spark, on one line: the error's condition and message, without the
    Python and JVM stack traces a Spark Connect error carries (hundreds of lines)."""
    lines = [line.strip() for line in error.getMessage().splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def build_session(master: str | None = None, remote: str | None = None) -> SparkSession:
    """A new Spark Connect session on ``remote``, else the local session (an already running
    one is reused with these settings): ``master`` defaults to spark-submit's under
    spark-submit, else to ``local[2]``."""
    if remote:
        builder = SparkSession.builder.remote(remote)
        for key, value in SQL_CONF.items():
            builder = builder.config(key, value)
        return builder.create()
    if any(variable in os.environ for variable in CONNECT_MODE_VARIABLES):
        raise RuntimeError(
            "this process is a Spark Connect client already (pyspark allows no JVM of its own "
            f"beside it); name the server with remote=, or clear {CONNECT_MODE_VARIABLES}"
        )
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


def spark_path(path: Path) -> str:
    """A path as the checker hands it to Spark: absolute, resolved in this process. A Spark
    Connect server resolves a relative path against its own working directory, not the
    client's (``eoslab verify runs/<id>`` read ``<the server's folder>/runs/<id>``)."""
    return str(path.resolve())


def read_dataset(spark: SparkSession, folder: Path, schema: pa.Schema) -> DataFrame:
    """A ledger folder's rows; an empty (or missing) folder reads as no rows, not as an error, so
    a run whose workload never wrote a file is still checked (its records show up as anomalies)."""
    spark_schema = from_arrow_schema(schema)
    if not any(folder.glob("*.parquet")):
        return spark.createDataFrame([], spark_schema)
    return spark.read.schema(spark_schema).parquet(spark_path(folder))


def small_run(records: int) -> bool:
    """Whether a run of ``records`` sends is small: a Spark job costs more than its rows."""
    return records <= SMALL_RUN_RECORDS


@contextmanager
def made_active(session: SparkSession) -> Iterator[None]:
    """``session`` the active one for as long as this lasts: pyspark binds to the active
    session what it makes without being told which (GX's queries; a checkpointed frame of
    Spark Connect, whose cached relation only its own session holds). A classic session is the
    JVM's one and active already; pyspark has no public setter for Spark Connect's."""
    holder = getattr(type(session), "_active_session", None)  # Spark Connect's, thread-local
    if holder is None:
        yield
        return
    before = getattr(holder, "session", None)
    holder.session = session
    try:
        yield
    finally:
        holder.session = before


@contextmanager
def run_settings(spark: SparkSession, records: int) -> Iterator[None]:
    """The session's settings for checking a run of ``records`` sends (small runs get
    :data:`SMALL_RUN_CONF`), put back afterwards: a session may check many runs."""
    settings = SMALL_RUN_CONF if small_run(records) else {}
    before: dict[str, str | None] = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)

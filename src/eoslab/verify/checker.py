"""Check one run: read its topic and history, derive anomalies, validate the suites, judge.

A run with a consumer workload (run.json's ``consumption``) gets the consumer half as well: its
consumption ledger and sink beside the topic, the consumer anomalies, the consumer figures in
the metrics, the ``consumer_exactly_once`` suite and the consumer checks in the verdict.

A run with transactional producers (run.json's ``transactions``) gets the transactions checked:
its transaction ledger beside the read of the consumer under test, the transaction anomalies
(:mod:`eoslab.verify.transactions.anomalies`), the transaction figures in the metrics, the
``transactions`` suite and the transaction checks in the verdict. A run with a copier stage
(run.json's ``copier``) gets the copy checked: the output topic read read_committed (kept in
``copy-topic/``) beside the input the read_committed reader saw, the copy anomalies
(:mod:`eoslab.verify.copy.anomalies`), the copier figures, and the ``copy`` suite.

Everything it writes goes under ``RUN_DIR/checker/`` (replaced on every check): the anomaly
tables (Parquet, one folder per anomaly), ``metrics.json``, the GX context with its Data Docs
(``gx/``) and ``verdict.json``.

The checker must agree with itself: every GX expectation with the anomaly tables it stands for,
and, on a run of at most :data:`NAIVE_BESIDE_RECORDS` sends, the naive checker
(:mod:`eoslab.verify.naive`, a second implementation in plain Python, run on the copies of the
topics this check kept) with Spark on every count both compute. Where they disagree the verdict
is invalid (``checker_disagrees``): a checker bug must not leave a green cell.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from eoslab.rundir import (
    COPIER_SCHEMA,
    EPOCH_BUMPS,
    FOREIGN,
    HANGING_TRANSACTIONS,
    ConsumptionInfo,
    NaiveAgreement,
    RunDir,
    RunInfo,
    TransactionsInfo,
    Verdict,
    VerdictLinks,
)
from eoslab.verify import metrics, naive, suites
from eoslab.verify.consumer import anomalies as consumer_anomalies
from eoslab.verify.consumer.consumption import read_commits, read_effects, read_processed
from eoslab.verify.consumer.ledger import build_consumer_ledger, build_polls, committed_offsets
from eoslab.verify.consumer.sink_location import jdbc_sink
from eoslab.verify.copy import anomalies as copy_anomalies
from eoslab.verify.copy.ledger import build_copy_ledger, parse_copies
from eoslab.verify.counting import count_rows
from eoslab.verify.producer import anomalies as producer_anomalies
from eoslab.verify.producer.history import excuse_aborted, read_history
from eoslab.verify.producer.ledger import build_ledger, by_key, run_rows
from eoslab.verify.spark_session import (
    build_session,
    default_remote,
    made_active,
    read_dataset,
    run_settings,
    small_run,
    spark_path,
)
from eoslab.verify.topic_reader import KeptTopic, classify, keep_topics, read_kept
from eoslab.verify.transactions import anomalies as txn_anomalies
from eoslab.verify.transactions.ledger import (
    aborted_records,
    build_txn_ledger,
    read_reads,
    read_transactions,
)
from eoslab.verify.verdict import (
    MAX_EXAMPLES,
    build_verdict,
    errors_observed,
    expected_checks,
    fatal_observed,
    judge,
)

EMPTY_PART = "part-00000-empty.parquet"
NAIVE_BESIDE_RECORDS = 20_000
"""Runs of at most this many sends get the naive checker beside Spark (well under a second at
the matrix's sizes; far longer than Spark at the soak's)."""


class Stopwatch:
    """Wall seconds per phase of a check (``metrics.json``'s ``check_phases_s``: which phase
    is the slow one; Spark is lazy, so a phase holds the work its actions set off)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = round(time.perf_counter() - started, 2)


def _write_table(table: DataFrame, path: Path, rows: int) -> None:
    """Write one anomaly table; an empty one as a Parquet file of its schema, without Spark."""
    if rows:
        table.write.mode("overwrite").parquet(spark_path(path))
        return
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_arrow_schema(table.schema).empty_table(), path / EMPTY_PART)


def _examples(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    """The first rows of a written anomaly table, in log order."""
    rows = spark.read.parquet(spark_path(path)).orderBy("partition", "offset").limit(MAX_EXAMPLES)
    return [row.asDict() for row in rows.collect()]


def snapshot(frame: DataFrame) -> DataFrame:
    """``frame`` computed once, now, and held by Spark with its plan cut
    (``localCheckpoint``): every table, count and expectation built on it reads the same rows
    (the log as of this moment, though the topic grows) and Spark plans them over a leaf, not
    over the whole lineage again. Cutting the plan is what makes it cheaper than ``persist``,
    which keeps the lineage: a consumer cell's check took 7-8 s against 12-15 s, Spark's CPU
    9-12 s against 15-24 s (measured on the same runs, verdicts equal). Released when the
    frame is (Spark Connect drops its cached relation once the client's frame is collected)."""
    with made_active(frame.sparkSession):  # Spark Connect binds the result to the active one
        return frame.localCheckpoint(eager=True)


def _consumer_half(
    spark: SparkSession, run: RunDir, consumption: ConsumptionInfo, ledger: DataFrame
) -> tuple[dict[str, DataFrame], dict[str, DataFrame], dict[str, Any]]:
    """The consumer half's frames for GX (the consumer ledger and the polls, snapshots; the
    commits), its anomaly tables and its figures."""
    commits = read_commits(spark, run)
    committed = committed_offsets(commits)
    processed = read_processed(spark, run)
    consumer_ledger = snapshot(
        build_consumer_ledger(
            ledger,
            processed,
            read_effects(spark, jdbc_sink(consumption.sink, run.path)),
            committed,
        )
    )
    figures = metrics.consumption_summary(consumer_ledger, commits, committed, consumption)
    polls = snapshot(build_polls(ledger, processed))
    tables = consumer_anomalies.derive(consumer_ledger, polls, commits)
    return {"consumer_ledger": consumer_ledger, "polls": polls, "commits": commits}, tables, figures


def _transactions(
    spark: SparkSession, run: RunDir, transactions: TransactionsInfo
) -> tuple[DataFrame, dict[str, DataFrame], dict[str, Any]]:
    """The transaction ledger (a snapshot) of the consumer under test's read, its anomaly tables,
    and the transaction figures."""
    ledger_rows = read_transactions(spark, run)
    txn_ledger = snapshot(
        build_txn_ledger(ledger_rows, read_reads(spark, run, transactions.isolation))
    )
    in_log = txn_anomalies.aborted_in_log(
        build_txn_ledger(ledger_rows, read_reads(spark, run, "read_uncommitted"))
    )
    outcomes = {
        row["outcome"]: int(row["count"])
        for row in ledger_rows.groupBy("outcome").count().collect()
    }
    figures = {
        "isolation": transactions.isolation,
        "outcomes": outcomes,
        "aborted_records_in_log": in_log.count(),
        "reads": {read.isolation: read.records for read in transactions.reads},
    }
    return txn_ledger, txn_anomalies.derive(txn_ledger), figures


def _copy_stage(
    spark: SparkSession, run: RunDir, info: RunInfo, copies: DataFrame
) -> tuple[DataFrame, dict[str, DataFrame], dict[str, Any]]:
    """The copy ledger (a snapshot) of the output read read_committed against the input the
    read_committed reader saw, its anomaly tables, and the copier figures."""
    assert info.copier is not None
    copy_ledger = snapshot(
        build_copy_ledger(
            read_transactions(spark, run),
            read_reads(spark, run, "read_committed"),
            parse_copies(copies, info.run_id),
            info.copier.committed_offsets,
        )
    )
    batches = read_dataset(spark, run.copier_dir, COPIER_SCHEMA)
    figures = {
        "transactional": info.copier.transactional,
        "sessions": len(info.copier.sessions),
        "crashed": sum(1 for session in info.copier.sessions if session.crashed),
        "unconfirmed_commits": sum(1 for s in info.copier.sessions if s.unconfirmed_commit),
        "batches": {
            row["outcome"]: int(row["count"])
            for row in batches.groupBy("outcome").count().collect()
        },
        "copies": copies.count(),
        "committed_offsets": {str(p): o for p, o in sorted(info.copier.committed_offsets.items())},
    }
    return copy_ledger, copy_anomalies.derive(copy_ledger), figures


def verify_run(
    run_dir: Path,
    spark: SparkSession | None = None,
    master: str | None = None,
    bootstrap: str | None = None,
    remote: str | None = None,
    *,
    from_topic: bool = False,
) -> Verdict:
    """Check the run in ``run_dir`` and write its verdict. The log is the copy the run
    directory keeps (``topic/``) once a check has read the topic; ``from_topic`` reads the
    topic again (and keeps that); ``bootstrap`` overrides run.json's (the topic read from
    elsewhere than where it was written, e.g. through another listener).

    Spark: ``spark`` if given, else a session on ``master`` (a JVM of its own), else a Spark
    Connect session on ``remote`` or the default one (:func:`default_remote`: the lab's warm
    Spark), closed when the check ends, else a local JVM."""
    run = RunDir(run_dir)
    info = run.read_info()
    # a run directory or expectation the checker cannot use fails before any Spark starts
    expected = expected_checks(
        info.expected,
        consumed=info.consumption is not None,
        transactional=info.transactions is not None,
        copied=info.copier is not None,
    )
    with _session(spark, master, remote) as session, run_settings(session, run.history_rows()):
        return _check(run, info, expected, session, bootstrap, from_topic=from_topic)


def keep_run_topics(run_dir: Path, remote: str) -> list[str]:
    """Keep the run's topics in its directory now, on the Spark Connect server ``remote``
    (:func:`~eoslab.verify.topic_reader.keep_topics`); the topics kept. A lane does it before
    its next run: that run's faults (a broker killed, the proxy holding its route) would meet
    a check reading the topic later."""
    run = RunDir(run_dir)
    with _session(None, None, remote) as session:
        return keep_topics(session, run, run.read_info())


@contextmanager
def _session(
    spark: SparkSession | None, master: str | None, remote: str | None
) -> Iterator[SparkSession]:
    """``spark`` if given; else a Spark Connect session (``remote``, or the default one),
    stopped afterwards; else a JVM session on ``master``."""
    if spark is not None:
        yield spark
    elif master is None and (remote := remote or default_remote()):
        session = build_session(remote=remote)
        try:
            yield session
        finally:
            session.stop()
    else:
        yield build_session(master)


def _naive_beside(run: RunDir, counts: dict[str, int]) -> NaiveAgreement | None:
    """The naive checker on the same run, from the copies of its topics this check kept, held
    against Spark's counts; None for a run too large for it (:data:`NAIVE_BESIDE_RECORDS`)."""
    if run.history_rows() > NAIVE_BESIDE_RECORDS:
        return None
    naive_counts = naive.check(run.path, kept=True).counts
    compared = sorted(set(counts) & set(naive_counts))
    return NaiveAgreement(
        compared=compared,
        differences={
            name: [counts[name], naive_counts[name]]
            for name in compared
            if counts[name] != naive_counts[name]
        },
    )


def _check(
    run: RunDir,
    info: RunInfo,
    expected: dict[str, str],
    spark: SparkSession,
    bootstrap: str | None,
    *,
    from_topic: bool,
) -> Verdict:
    shutil.rmtree(run.checker_dir, ignore_errors=True)
    run.anomalies_dir.mkdir(parents=True)
    phases = Stopwatch()
    with phases("log and ledger"):
        raw = read_kept(
            spark, KeptTopic.log(run, info), info, bootstrap=bootstrap, from_topic=from_topic
        )
        history = read_history(spark, run.history_dir, info.log_starts())
        if info.transactions is not None:
            history = excuse_aborted(history, aborted_records(read_transactions(spark, run)))
        ledger = snapshot(build_ledger(classify(raw, info.run_id), history))
        copies = (
            None
            if info.copier is None
            else read_kept(
                spark,
                KeptTopic.copies(run, info),
                info,
                bootstrap=bootstrap,
                from_topic=from_topic,
            )
        )
    with phases("anomalies"):
        key_ledger = snapshot(by_key(ledger))
        tables = {
            **producer_anomalies.derive(ledger, key_ledger),
            FOREIGN: producer_anomalies.foreign(ledger),
        }
        frames = {"log": ledger, "ledger": run_rows(ledger), "key_ledger": key_ledger}
        half_figures: dict[str, Any] = {}
        if info.consumption is not None:
            consumer_frames, consumer_tables, half_figures["consumption"] = _consumer_half(
                spark, run, info.consumption, ledger
            )
            frames.update(consumer_frames)
            tables.update(consumer_tables)
        if info.transactions is not None:
            frames["txn_ledger"], txn_tables, half_figures["transactions"] = _transactions(
                spark, run, info.transactions
            )
            tables.update(txn_tables)
        if copies is not None:
            frames["copy_ledger"], copy_tables, half_figures["copier"] = _copy_stage(
                spark, run, info, copies
            )
            tables.update(copy_tables)
        counts = count_rows(tables)
    with phases("anomaly tables"):
        examples: dict[str, list[dict[str, Any]]] = {}
        for name, table in tables.items():
            _write_table(table, run.anomaly_dir(name), counts[name])
            examples[name] = _examples(spark, run.anomaly_dir(name)) if counts[name] else []
    with phases("figures"):
        history_figures = metrics.history_summary(history)
        figures = {
            "run_id": info.run_id,
            "partitions": info.partitions,
            **metrics.log_summary(ledger),
            "anomalies": counts,
            **history_figures,
            **half_figures,
        }
    with phases("gx"):
        gx_report = suites.validate(
            frames, run.checker_dir, counts, evaluate_once=not small_run(run.history_rows())
        )
    with phases("naive checker"):
        beside = _naive_beside(run, counts)
    figures["check_phases_s"] = phases.seconds
    run.metrics_json.write_text(json.dumps(figures, indent=2) + "\n")
    observed = {
        **counts,
        **errors_observed(history_figures["errors"], info.broker_errors),
        **fatal_observed(info.fatal_sessions(), expected),
        EPOCH_BUMPS: info.epoch_bumps,
        **(
            {}
            if info.transactions is None
            else {HANGING_TRANSACTIONS: len(info.transactions.held_at_end)}
        ),
    }
    verdict = build_verdict(
        info,
        checks=judge(expected, observed, examples),
        gx=gx_report,
        naive=beside,
        links=VerdictLinks(
            anomalies={name: str(run.anomaly_dir(name)) for name in tables},
            metrics=str(run.metrics_json),
            data_docs=gx_report.data_docs,
        ),
    )
    run.write_verdict(verdict)
    return verdict

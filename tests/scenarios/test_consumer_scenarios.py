"""`eoslab run` with a consumer workload on the real lab: the consumer half of a run directory
(seed 004), produced by the scenario's own nemesis steps."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from eoslab.rundir import HandlerMode, LabTarget, RunDir
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.postgres import LAB_SINK
from eoslab.scenarios.executor import RunResult
from eoslab.verify.checker import verify_run
from lab_runs import execute_on

pytestmark = pytest.mark.lab


COUNT_EFFECTS = "SELECT COUNT(*), COUNT(DISTINCT message_id) FROM effects"


def sink_counts(lab: LocalRuntime, run_dir: RunDir) -> tuple[int, int]:
    """(effects, distinct messages) in the run's sink: SQLite in the run, or a database of the
    lab's PostgreSQL."""
    info = run_dir.read_info()
    assert info.consumption is not None
    if info.consumption.sink.startswith("sqlite:"):
        with sqlite3.connect(run_dir.sink_sqlite) as sink:
            effects, messages = sink.execute(COUNT_EFFECTS).fetchone()
    else:
        database = info.consumption.sink.rsplit("/", 1)[1]
        with psycopg.connect(lab.postgres().url(database)) as sink:
            row = sink.execute(COUNT_EFFECTS).fetchone()
            assert row is not None
            effects, messages = row
    return int(effects), int(messages)


def run_cell(
    lab: LocalRuntime,
    tmp_path: Path,
    scenario: str,
    target: LabTarget,
    mode: HandlerMode,
    *,
    sink: str | None = None,
    client: str | None = None,
) -> RunResult:
    """One cell of a consumer scenario, 1500 records, run without a problem."""
    result = execute_on(
        lab,
        tmp_path,
        scenario,
        target,
        records=1500,
        mode=mode,
        sink=sink,
        client=client,
    )
    assert result.problems == []
    return result


# On Kafka's Java client (librdkafka's commit-after runs through Airflow in test_dag_runs.py, its
# idempotent handler in test_catalogue.py): the negative control doubles the effect, the dedup
# table does not
@pytest.mark.parametrize(
    ("target", "mode", "sink", "doubled"),
    [("kafka", "commit-after", None, True), ("refbroker", "dedup-table", LAB_SINK, False)],
)
def test_a_consumer_crash_before_commit_redelivers(
    *,
    lab: LocalRuntime,
    tmp_path: Path,
    target: LabTarget,
    mode: HandlerMode,
    sink: str | None,
    doubled: bool,
) -> None:
    result = run_cell(
        lab, tmp_path, "consumer-crash-before-commit", target, mode, sink=sink, client="java:3.9.2"
    )
    info = result.run_dir.read_info()
    assert info.client_version == "java:3.9.2"
    assert info.consumption is not None
    assert info.consumption.mode == mode
    assert info.expected["effect_duplicate"] == (">0" if doubled else "0")
    assert mode in info.run_id
    crashes = [
        json.loads(line)
        for line in result.run_dir.faults_jsonl.read_text().splitlines()
        if json.loads(line)["kind"] == "consumer-crash"
    ]
    assert crashes[0]["detail"]["between_effect_and_commit"] is True
    assert "restarted" in crashes[1]["detail"]
    # consumer 0's first session, the other consumer, consumer 0's second session
    assert len(info.consumption.sessions) == 3
    processed = ds.dataset(result.run_dir.processed_dir).to_table().to_pylist()
    records = [(r["partition"], r["offset"]) for r in processed]
    assert len(records) > len(set(records))  # some were delivered again
    assert info.consumption.sink.startswith("sqlite:" if sink is None else "postgresql://")
    effects, messages = sink_counts(lab, result.run_dir)
    assert messages == 1500
    assert (effects > messages) is doubled


def messages(run_dir: RunDir, anomaly: str) -> set[tuple[str, str, int]]:
    """The (session, key, key_seq) of an anomaly table's rows."""
    rows = pq.read_table(run_dir.anomaly_dir(anomaly)).to_pylist()
    return {(r["session_id"], r["key"], r["key_seq"]) for r in rows}


@pytest.mark.parametrize(
    ("target", "mode"), [("kafka", "idempotent"), ("refbroker", "dedup-table")]
)
def test_a_late_producer_retry_loses_its_effect_under_the_idempotent_guard_only(
    *,
    lab: LocalRuntime,
    spark: SparkSession,
    tmp_path: Path,
    target: LabTarget,
    mode: HandlerMode,
) -> None:
    """The dropped Produce request's records land after later key_seqs of their keys: the
    idempotent handler skips exactly those (lost effects), the dedup table applies exactly
    those late (reordered effects)."""
    result = run_cell(lab, tmp_path, "idempotent-stale-skip", target, mode)

    verdict = verify_run(result.run_dir.path, spark=spark)

    assert verdict.conforms, verdict.mismatches
    late = messages(result.run_dir, "key_reorder")
    assert late  # the dropped request was resent after later records of its keys
    lost, reordered = (
        messages(result.run_dir, "effect_lost"),
        messages(result.run_dir, "effect_reorder"),
    )
    assert (lost, reordered) == ((late, set()) if mode == "idempotent" else (set(), late))
    assert verdict.gx.agrees_with_anomalies

"""The consumer half end to end on the lab's Kafka: the real producer workload writes a topic, the
real consumer workload consumes it once per handler mode with a crash between its effects and
their commit, and the checker judges each run (in process; once under spark-submit)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Producer
from planted_runs import located, spark_submit
from pyspark.sql import SparkSession

from eoslab.admin import create_topic, end_offsets
from eoslab.clock import now_ms
from eoslab.run_context import RunContext
from eoslab.rundir import CONSUMER_ANOMALIES, PRODUCER_ANOMALIES, RunDir, RunInfo, new_run_id
from eoslab.runtime.local import LocalRuntime
from eoslab.verify import naive
from eoslab.verify.checker import verify_run
from eoslab.workload.consumer.spec import ConsumerWorkloadSpec
from eoslab.workload.consumer.workload import ConsumerWorkload
from lab_runs import blind_processings
from lab_workloads import PRODUCER_CONFIG, run_producers

pytestmark = pytest.mark.lab

RECORDS = 600
PARTITIONS = 3
SEED = 5
CRASH_AT = 250
COMMIT_EVERY = 100
UNCOMMITTED = CRASH_AT - 2 * COMMIT_EVERY
"""The crashed session committed after its 100th and 200th processings: at least 50 effects
(one more processing when the foreign record was among them) are not committed."""
WAIT_S = 90.0
EXPECTED: dict[str, dict[str, str]] = {
    "auto-commit": {"unprocessed": ">0"},
    "commit-after": {"redelivered": ">0", "effect_duplicate": ">0"},
    "dedup-table": {"redelivered": ">0"},
}
"""Seed 004 per mode: at-most-once loses what was handed out and not applied; at-least-once
applies the uncommitted effects again (the negative control); the dedup table absorbs the
redelivery. The idempotent handler under the same crash: the catalogue's
consumer-crash-before-commit/refbroker/idempotent cell (tests/scenarios/test_catalogue.py)."""


@dataclass(frozen=True)
class Produced:
    run: RunDir
    """run.json and the history: the producer half, copied into every consumer run."""
    ends: dict[int, int]


@pytest.fixture(scope="module")
def produced(lab: LocalRuntime, tmp_path_factory: pytest.TempPathFactory) -> Produced:
    """RECORDS workload records on a 3-partition topic, then one foreign record in partition 0."""
    bootstrap = lab.config.bootstrap_servers
    run_id = new_run_id("consumer-crash-before-commit", "kafka")
    topic = f"eos-{run_id}"
    create_topic(bootstrap, topic, PARTITIONS, 3)
    run = RunDir(tmp_path_factory.mktemp("produced") / run_id).create()
    started_ms = now_ms()
    workload = run_producers(
        bootstrap,
        run,
        run_id,
        topic,
        records=RECORDS,
        partitions=PARTITIONS,
        seed=SEED,
        wait_s=WAIT_S,
    )
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"not a workload record", partition=0)
    assert producer.flush(30) == 0
    run.write_info(
        RunInfo(
            run_id=run_id,
            scenario="consumer-crash-before-commit",
            target="kafka",
            bootstrap=bootstrap,
            topic=topic,
            partitions=PARTITIONS,
            seed=SEED,
            started_ms=started_ms,
            ended_ms=now_ms(),
            producer_config=PRODUCER_CONFIG,
            sessions=workload.sessions,
        )
    )
    ends = end_offsets(bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == RECORDS + 1
    return Produced(run, ends)


def consume(produced: Produced, mode: str, root: Path) -> tuple[RunDir, dict[str, Any]]:
    """A consumer run of the produced topic: consumer 0 kills itself (-9) after its 250th
    effect, a new session finishes the topic. Returns the run and the progress at the crash."""
    run = RunDir(shutil.copytree(produced.run.path, root / mode))
    info = run.read_info()
    workload = ConsumerWorkload(
        ConsumerWorkloadSpec(
            mode=mode,  # type: ignore[arg-type]
            group=f"eoslab-test-{uuid.uuid4().hex[:8]}",
            commit_every=COMMIT_EVERY,
            crash_after_effects={0: CRASH_AT},
            idle_exit_s=60.0,
        ),
        RunContext(
            run_id=info.run_id,
            run_dir=run,
            target="kafka",
            lab_target="kafka",
            bootstrap=info.bootstrap,
            topic=info.topic,
            partitions=PARTITIONS,
            seed=SEED,
        ),
    )
    workload.start()
    try:
        assert workload.wait(WAIT_S)  # the session killed itself at its crash point
        at_crash = workload.progress(0)
        assert at_crash["state"] == "crashing"
        workload.restart(0)
        assert workload.wait_caught_up(WAIT_S, produced.ends), workload.committed_offsets()
    finally:
        workload.stop()
    assert workload.failures() == []
    run.write_info(
        info.model_copy(update={"consumption": workload.info(), "expected": EXPECTED[mode]})
    )
    return run, at_crash


@pytest.fixture(scope="module")
def consumed(
    produced: Produced, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], tuple[RunDir, dict[str, Any]]]:
    """One consumer run per mode, made when first asked for."""
    root = tmp_path_factory.mktemp("consumed")
    runs: dict[str, tuple[RunDir, dict[str, Any]]] = {}

    def get(mode: str) -> tuple[RunDir, dict[str, Any]]:
        if mode not in runs:
            runs[mode] = consume(produced, mode, root)
        return runs[mode]

    return get


def processed_after_last_commit(run: RunDir) -> list[dict[str, Any]]:
    """The crashed session's processings after its last commit (its 100th and 200th): what the
    next session gets again."""
    consumption = run.read_info().consumption
    assert consumption is not None
    crashed = consumption.sessions[0].session_id
    rows = ds.dataset(run.processed_dir).to_table().to_pylist()
    return [r for r in rows if r["consumer_session"] == crashed and r["n"] >= 2 * COMMIT_EVERY]


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_a_crash_before_commit_is_judged_as_its_handler_mode_promises(
    spark: SparkSession,
    produced: Produced,
    consumed: Callable[[str], tuple[RunDir, dict[str, Any]]],
    mode: str,
) -> None:
    run, at_crash = consumed(mode)

    verdict = verify_run(run.path, spark=spark)

    assert verdict.conforms, verdict.mismatches
    if mode == "auto-commit":  # handed out, committed by librdkafka, never processed
        lost, uncommitted = sum(at_crash["received"].values()) - at_crash["processed"], []
        assert lost > 0
    else:
        lost, uncommitted = 0, processed_after_last_commit(run)
        assert len(uncommitted) >= UNCOMMITTED
    doubled = sum(r["effect"] == "applied" for r in uncommitted) if mode == "commit-after" else 0
    observed = {check.name: check.observed for check in verdict.checks}
    assert {name: observed[name] for name in CONSUMER_ANOMALIES} == {
        "unprocessed": lost,
        "redelivered": len(uncommitted),
        "effect_duplicate": doubled,
        "effect_reorder": 0,
        "effect_lost": 0,
        # the crashed session's successor starts from the committed offset: another epoch
        "poll_skip": 0,
        "nonmonotonic_poll": 0,
        "watermark_regression": 0,
        "offset_regression": 0,
        "inconsistent_offset": 0,
    }
    assert {name: observed[name] for name in PRODUCER_ANOMALIES} == dict.fromkeys(
        PRODUCER_ANOMALIES, 0
    )
    assert observed["foreign"] == 1
    assert blind_processings(run) == []  # librdkafka's cached watermark, every processing
    assert verdict.gx.agrees_with_anomalies
    assert verdict.gx.suites["consumer_exactly_once"].success is (lost + doubled == 0)

    metrics = json.loads(run.metrics_json.read_text())
    assert naive.check(run.path).counts == metrics["anomalies"]
    figures = metrics["consumption"]
    lost_messages = sum(1 for (m,) in located(run, "unprocessed", "message_id") if m)
    assert figures["mode"] == mode
    assert figures["records_processed"] == RECORDS + 1 - lost
    assert figures["processed"] == RECORDS + 1 - lost + len(uncommitted)
    assert figures["messages_with_effect"] == RECORDS - lost_messages
    assert figures["effects"] == RECORDS - lost_messages + doubled
    assert figures["commits"]["failed"] == 0
    assert figures["commits"]["committed_offsets"] == {str(p): e for p, e in produced.ends.items()}


def test_spark_submit_fails_the_negative_controls_of_a_dedup_table_run(
    consumed: Callable[[str], tuple[RunDir, dict[str, Any]]],
) -> None:
    """The dedup-table run under spark-submit, expected to show what it does not: every consumer
    check fails, with the counts of the in-process check."""
    run, _ = consumed("dedup-table")
    info = run.read_info()
    redelivered = len(processed_after_last_commit(run))
    controls = {"unprocessed": ">0", "redelivered": "0", "effect_duplicate": ">0"}
    run.write_info(info.model_copy(update={"expected": {**controls, "effect_reorder": ">0"}}))
    try:
        job = spark_submit(run)
    finally:
        run.write_info(info)

    assert job.returncode == 1, job.stderr[-3000:]
    verdict = run.read_verdict()
    assert [(m.name, m.observed) for m in verdict.mismatches] == [
        ("unprocessed", 0),
        ("redelivered", redelivered),
        ("effect_duplicate", 0),
        ("effect_reorder", 0),
    ]
    assert f"redelivered: expected 0, observed {redelivered}" in job.stdout
    assert verdict.gx.success

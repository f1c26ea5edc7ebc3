"""The catalogue on the lab's Kafka 4, through the checker: an idempotent producer loses nothing
when the active controller is killed, and every nemesis kind plays on the KRaft nodes (consumer
scenarios under KIP-848's protocol). Pause, rolling restart and producer crash play on Kafka 4
in tests/scenarios/test_catalogue.py (leader-pause, rolling-restart, producer-restart); a
partition leader killed -9 under the same producer, in tests/soak/test_kafka_cycles.py (and
leader-kill on Kafka 4 in the nightly)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from eoslab.admin import metadata_quorum
from eoslab.rundir import GroupProtocol, RunDir, Verdict, VerdictStatus
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import kafka4_service
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import RunResult
from eoslab.scenarios.schema import Scenario
from eoslab.verify.checker import verify_run
from lab_runs import execute_on

pytestmark = [pytest.mark.lab, pytest.mark.kafka4]


def faults(run_dir: RunDir) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run_dir.faults_jsonl.read_text().splitlines()]


def run_and_check(
    lab: LocalRuntime,
    spark: SparkSession,
    tmp_path: Path,
    scenario: Scenario,
    *,
    records: int | None = None,
    group_protocol: GroupProtocol | None = None,
) -> tuple[RunResult, Verdict]:
    """The scenario on kafka4, checked: it ran without a problem, every step of its timeline
    took effect, and it conforms."""
    result = execute_on(
        lab,
        tmp_path,
        scenario,
        "kafka4",
        records=records,
        group_protocol=group_protocol,
    )
    assert result.problems == []
    assert [f.step for f in result.info.faults] == list(range(len(scenario.nemesis)))
    assert [f.summary for f in result.info.faults if not f.took_effect] == []
    verdict = verify_run(result.run_dir.path, spark=spark)
    assert verdict.status is VerdictStatus.CONFORMS, [m.summary for m in verdict.mismatches]
    return result, verdict


def acked_everything(result: RunResult, records: int) -> None:
    history = ds.dataset(result.run_dir.history_dir).to_table().to_pylist()
    assert len(history) == records
    assert {row["outcome"] for row in history} == {"ack"}


def test_an_idempotent_producer_loses_nothing_when_the_active_controller_is_killed(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path
) -> None:
    before = metadata_quorum(lab.config.kafka4_bootstrap)
    assert before is not None
    result, verdict = run_and_check(
        lab, spark, tmp_path, find_scenario("controller-kill"), records=1500
    )
    acked_everything(result, 1500)
    (killed,) = {f["target"] for f in faults(result.run_dir) if f["kind"] == "kill"}
    # the quorum's leader was killed (not a random voter): the quorum elected another
    assert killed == kafka4_service(before.leader_id)
    after = metadata_quorum(lab.config.kafka4_bootstrap)
    assert after is not None
    assert after.leader_epoch > before.leader_epoch
    observed = {check.name: check.observed for check in verdict.checks}
    assert (observed["lost"], observed["duplicate"]) == (0, 0)


CONTROLLER_RESTART = Scenario.model_validate(
    {
        "name": "controller-restart",
        "description": "A clean restart of the active controller while producing.",
        "targets": ["kafka", "kafka4"],
        "workload": {"producers": 1, "records": 1500, "rate": 300},
        "nemesis": [{"kind": "restart", "at": 1, "target": "controller"}],
    }
)


@pytest.mark.parametrize(
    ("scenario", "records", "kind"),
    [
        ("lost-acks", 1500, "proxy:drop-response"),
        ("inflight-6", None, "probe"),
    ],
)
def test_the_proxy_and_the_probe_play_on_kafka4(
    *,
    lab: LocalRuntime,
    spark: SparkSession,
    tmp_path: Path,
    scenario: str,
    records: int | None,
    kind: str,
) -> None:
    result, verdict = run_and_check(lab, spark, tmp_path, find_scenario(scenario), records=records)
    played = [f for f in faults(result.run_dir) if f["kind"] == kind]
    assert played
    observed = {check.name: check.observed for check in verdict.checks}
    if scenario == "lost-acks":
        assert [f["detail"]["injected"] for f in played if f["phase"] == "end"] == [3]
    if scenario == "inflight-6":  # Kafka 4's 5-batch cache: as 3.9's, the retry is doubled
        assert observed["duplicate"] > 0
        assert observed["errors.OUT_OF_ORDER_SEQUENCE_NUMBER"] > 0


def test_a_clean_restart_of_the_controller(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path
) -> None:
    result, _ = run_and_check(lab, spark, tmp_path, CONTROLLER_RESTART)
    acked_everything(result, 1500)
    restarts = [f for f in faults(result.run_dir) if f["kind"] == "restart"]
    assert [f["phase"] for f in restarts] == ["instant"]


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("consumer-crash-before-commit", "consumer-crash"),
        ("zombie-consumer", "consumer-pause"),
        ("rebalance-storm", "consumer-join"),
        ("coordinator-kill", "kill"),
    ],
)
def test_the_consumer_scenarios_conform_under_kip848(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path, scenario: str, kind: str
) -> None:
    """dedup-table (each scenario's own mode): whatever KIP-848's protocol does with the crashed,
    frozen, joining or orphaned members, no effect lands twice."""
    # each at its own size: rebalance-storm's last join comes 16 s in
    result, verdict = run_and_check(
        lab, spark, tmp_path, find_scenario(scenario), group_protocol="consumer"
    )
    info = result.run_dir.read_info()
    assert info.consumption is not None
    assert info.consumption.group_protocol == "consumer"
    assert info.run_id.split("-kafka4-")[0].endswith(".dedup-table.kip848")
    assert [f for f in faults(result.run_dir) if f["kind"] == kind]
    observed = {check.name: check.observed for check in verdict.checks}
    assert observed["effect_duplicate"] == 0
    if scenario == "zombie-consumer":
        held, woken = wake_commits(result.run_dir)
        assert woken, "the zombie never committed on waking: nothing to fence"
        assert all(r["generation"] == held for r in woken), woken  # with its stale epoch
        assert all(r["error"] is not None for r in woken), woken  # every one of them refused


def wake_commits(run_dir: RunDir) -> tuple[int, list[dict[str, Any]]]:
    """The member epoch the zombie held when it froze (that of its last record processed
    before the freeze), and the commits it sent the moment it woke."""
    frozen_ms = next(
        f["ts_ms"]
        for f in faults(run_dir)
        if f["kind"] == "consumer-pause" and f["phase"] == "start"
    )
    processed = ds.dataset(run_dir.processed_dir).to_table().to_pylist()
    held = max(
        (r for r in processed if r["consumer"] == 0 and r["processed_ms"] <= frozen_ms),
        key=lambda r: r["processed_ms"],
    )["generation"]
    commits = ds.dataset(run_dir.commits_dir).to_table().to_pylist()
    return held, [r for r in commits if r["consumer"] == 0 and r["trigger"] == "wake"]

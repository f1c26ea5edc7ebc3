"""Cells on Kafka's Java client (the driver of services/clients/java): a producer-half fault on
Kafka 4 and group consumers in dedup-table mode, through `eoslab run`'s executor and the checker,
on the real lab. The reference broker's Java dedup-table cell and the Java commit-after negative
control are in test_consumer_scenarios.py; a Java transactional copier in test_txn_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eoslab.report.render import write_run_report
from eoslab.rundir import GroupProtocol, LabTarget, VerdictStatus
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import RunError, RunResult, plan
from eoslab.verify.checker import verify_run
from lab_runs import blind_processings, execute_on

pytestmark = pytest.mark.lab

JAVA = "java:3.9.2"


def run_checked(
    lab: LocalRuntime,
    spark: SparkSession,
    tmp_path: Path,
    scenario: str,
    target: LabTarget,
    **options: object,
) -> tuple[RunResult, dict[str, int]]:
    """The cell on the Java client: every fault took effect, it conforms; its observations."""
    result = execute_on(
        lab,
        tmp_path,
        scenario,
        target,
        client=JAVA,
        **options,
    )
    assert result.invalid_because == []
    assert result.info.client == result.info.client_version == JAVA
    assert result.info.librdkafka is None
    verdict = verify_run(result.run_dir.path, spark=spark)
    reasons = [*verdict.invalid, *(m.summary for m in verdict.mismatches)]
    assert verdict.status is VerdictStatus.CONFORMS, reasons
    return result, {check.name: check.observed for check in verdict.checks}


@pytest.mark.kafka4
def test_lost_acks_on_kafka4_conforms_on_the_java_client_and_the_report_names_it(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path
) -> None:
    result, observed = run_checked(lab, spark, tmp_path, "lost-acks", "kafka4", records=1500)
    (lost_acks,) = result.info.faults
    assert lost_acks.took_effect, lost_acks.evidence
    assert observed["duplicate"] == observed["lost"] == 0
    assert "-lost-acks_java-3.9.2-kafka4-" in result.run_dir.path.name
    page = write_run_report(result.run_dir.path, tmp_path / "reports").read_text()
    assert f"client {JAVA}" in page
    assert "lost-acks_java-3.9.2" in page


@pytest.mark.parametrize(
    ("target", "protocol"),
    [
        pytest.param("kafka", "classic"),
        pytest.param("kafka4", "consumer", marks=pytest.mark.kafka4),
    ],
)
def test_a_java_group_consumer_with_a_processed_message_table_applies_every_effect_once(
    lab: LocalRuntime,
    spark: SparkSession,
    tmp_path: Path,
    target: LabTarget,
    protocol: GroupProtocol,
) -> None:
    """Killed between an effect and its commit, the Java consumer's records come again (on
    Kafka 4 under KIP-848's group protocol) and the dedup table keeps each effect once."""
    result, observed = run_checked(
        lab,
        spark,
        tmp_path,
        "consumer-crash-before-commit",
        target,
        records=1500,
        mode="dedup-table",
        group_protocol=protocol,
    )
    assert [f.took_effect for f in result.info.faults] == [True]
    assert observed["redelivered"] > 0
    assert observed["effect_duplicate"] == 0
    assert blind_processings(result.run_dir) == []  # position + currentLag, every poll


def test_a_property_the_java_client_lacks_is_refused_before_the_run() -> None:
    scenario = find_scenario("baseline").model_copy(update={"producer": {"batch.num.messages": 7}})
    with pytest.raises(RunError, match=r"batch\.num\.messages: 7: Kafka.s Java client sizes"):
        plan(scenario, "kafka", client=JAVA)

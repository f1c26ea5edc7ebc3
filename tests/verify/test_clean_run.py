"""A clean run, checked by `eoslab verify` on the lab's warm Spark: every suite passes, and the
verdict follows the expectations both ways (a negative control fails on a clean topic). The
spark-submit job (a JVM of its own) judges negative controls in
tests/verify/test_consumer_runs.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from planted_runs import plant_clean
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from eoslab.rundir import EPOCH_BUMPS, FOREIGN, PRODUCER_ANOMALIES, UNEXPECTED_FATAL, RunDir
from eoslab.runtime.local import LocalRuntime
from eoslab.settings import LAB_DIR, PORT_OFFSET
from eoslab.verify.command import app
from eoslab.verify.suites import load_suites


@pytest.fixture(scope="module")
def clean(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    run_dir, _ = plant_clean(tmp_path_factory.mktemp("runs"), kafka_bootstrap).write(
        expected={"duplicate": ">0"}
    )
    return run_dir


def on_the_lab(lab: LocalRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """`eoslab verify` finds the test lab's warm Spark as it finds a user's lab."""
    monkeypatch.setenv(LAB_DIR, str(lab.config.state_dir))
    monkeypatch.setenv(PORT_OFFSET, str(lab.config.port_offset))


def test_the_negative_control_fails_on_a_clean_topic(
    lab: LocalRuntime, spark: SparkSession, clean: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eoslab verify` in a process that has a Spark Connect session already (the tests'),
    whose ``tmp_view`` shows something else: GX must query the check's own session."""
    spark.range(1).createOrReplaceTempView("tmp_view")
    on_the_lab(lab, monkeypatch)

    result = CliRunner().invoke(app, [str(clean.path)])

    assert result.exit_code == 2, result.output
    assert re.search(r"duplicate\s+│\s+>0\s+│\s+0\s+│\s+MISMATCH", result.output), result.output
    verdict = json.loads(clean.verdict_json.read_text())
    assert verdict["conforms"] is False
    assert [(m["name"], m["observed"], m["examples"]) for m in verdict["mismatches"]] == [
        ("duplicate", 0, [])
    ]
    assert {c["name"]: c["observed"] for c in verdict["checks"]} == dict.fromkeys(
        (*PRODUCER_ANOMALIES, FOREIGN, UNEXPECTED_FATAL, EPOCH_BUMPS), 0
    )
    assert verdict["gx"]["success"] is True
    assert verdict["gx"]["agrees_with_anomalies"] is True
    producer_expectations = sum(len(suite.expectations) for suite in load_suites())
    assert [e["success"] for e in verdict["gx"]["expectations"]] == [True] * producer_expectations
    # the naive checker ran beside Spark, on the copy of the topic this check kept
    assert verdict["naive"]["differences"] == {}
    assert {"lost", "duplicate", "reorder", "gap", "phantom"} <= set(verdict["naive"]["compared"])
    assert "naive checker beside Spark: agrees" in result.output
    assert Path(verdict["links"]["data_docs"]).is_file()
    metrics = json.loads(clean.metrics_json.read_text())
    assert metrics["records"] == 3 * 30 + 1 + 20
    assert metrics["outcomes"] == {"ack": 111, "fail": 1, "unsent": 2, "indeterminate": 1}
    assert metrics["errors"] == {"_STATE": 2}


def test_verify_command_says_a_clean_run_conforms_on_the_labs_warm_spark(
    lab: LocalRuntime, clean: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = clean.read_info()
    clean.write_info(info.model_copy(update={"expected": {"indeterminate": "0"}}))
    on_the_lab(lab, monkeypatch)

    result = CliRunner().invoke(app, [str(clean.path)])

    # on one line: a failure's summary in CI's log shows the first line of the message only
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.output!r}"
    assert f"on the Spark Connect server {lab.config.spark_remote}" in result.output
    assert "conforms" in result.output
    verdict = json.loads(clean.verdict_json.read_text())
    assert verdict["conforms"] is True
    assert verdict["mismatches"] == []
    assert {c["name"]: c["expected"] for c in verdict["checks"]}["indeterminate"] == "0"


def test_verify_command_rejects_an_unknown_expectation(clean: RunDir) -> None:
    info = clean.read_info()
    clean.write_info(info.model_copy(update={"expected": {"duplicates": "0"}}))

    result = CliRunner().invoke(app, [str(clean.path)])

    assert result.exit_code == 1
    assert "unknown check 'duplicates'" in result.output

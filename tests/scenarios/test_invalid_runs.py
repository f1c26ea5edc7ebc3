"""A fault that never fired, or fired on nothing, makes the run invalid, never "conforms":
checked on the real lab by the real checker, and shown as invalid by the reports and the
commands' exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from eoslab.report.command import app as report_app
from eoslab.report.render import read_summary
from eoslab.rundir import VerdictStatus
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import parse_scenario
from eoslab.scenarios.executor import RunResult
from eoslab.verify.checker import verify_run
from lab_runs import execute_on

pytestmark = pytest.mark.lab


def run(lab: LocalRuntime, tmp_path: Path, **scenario: object) -> RunResult:
    return execute_on(
        lab,
        tmp_path,
        parse_scenario(
            {"name": "teeth", "description": "d", "targets": ["refbroker"], **scenario}, "teeth"
        ),
        "refbroker",
    )


def test_faults_that_never_fired_make_the_run_invalid_whatever_the_checks_say(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path
) -> None:
    # 500 records at full speed are sent long before 60 s; nobody sends CreatePartitions
    result = run(
        lab,
        tmp_path,
        workload={"records": 500},
        nemesis=[
            {"kind": "restart", "at": 60, "target": "refbroker"},
            {
                "kind": "proxy",
                "at": 0,
                "target": "refbroker",
                "fault": {"kind": "drop-request", "api": "CreatePartitions"},
                "duration": 1,
            },
        ],
    )
    skipped, silent = result.info.faults
    assert (skipped.took_effect, skipped.evidence) == (
        False,
        "skipped: the workload finished before its trigger",
    )
    assert not silent.took_effect
    assert silent.evidence.startswith("drop-request never fired")
    verdict = verify_run(result.run_dir.path, spark=spark)
    assert [c for c in verdict.checks if not c.conforms] == []  # every check as expected...
    assert verdict.status is VerdictStatus.INVALID  # ...and still no green cell
    assert verdict.invalid == [skipped.summary, silent.summary]

    reports = tmp_path / "reports"
    runner = CliRunner()
    done = runner.invoke(
        report_app, ["nightly", str(result.run_dir.path), "--reports-dir", str(reports)]
    )
    assert done.exit_code == VerdictStatus.INVALID.exit_code
    summary = read_summary(Path(done.stdout.strip()))
    assert (summary["invalid"], summary["conforms"]) == (1, False)
    page = (reports / "runs" / result.info.run_id / "index.html").read_text()
    assert 'class="verdict invalid"' in page
    assert "skipped: the workload finished before its trigger" in page

"""`airflow dags test` of both DAGs against the session's lab: small runs, the real checker
(on the lab's warm Spark, through the Spark provider's Spark Connect connection), the reports
they leave."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from dag_runner import DAG_RUN_TIMEOUT_S, DagRunner, tail

pytestmark = pytest.mark.lab

CRASH_RECORDS = 1200
"""Fewer than the scenario's own 1,500: the form's record count reaches the run."""


def runs_of(folder: Path, cell: str, target: str) -> set[Path]:
    return {p.parent for p in folder.glob(f"*-{cell}-{target}-*/run.json")}


def only_new_run(folder: Path, cell: str, target: str, before: set[Path]) -> Path:
    """The one run of the cell a DAG run made (a test run again finds its first attempt's)."""
    found = sorted(runs_of(folder, cell, target) - before)
    assert len(found) == 1, found
    return found[0]


def test_scenario_dag_finds_the_consumer_crash_doubling_effects_in_commit_after(
    dag_runner: DagRunner,
) -> None:
    """The form's handler mode and record count reach the run: consumers crash between effect
    and commit, commit-after applies redelivered records twice, and the run conforms because
    the checker found it (the consumer half's negative control, from the UI's DAG)."""
    conf = {
        "scenario": "consumer-crash-before-commit",
        "target": "kafka",
        "mode": "commit-after",
        "records": CRASH_RECORDS,
    }
    cell = "consumer-crash-before-commit.commit-after"
    before = runs_of(dag_runner.runs, cell, "kafka")
    done = dag_runner.test("eos_scenario", json.dumps(conf), "scenario-consumer-crash")
    assert done.returncode == 0, tail(done)

    run_dir = only_new_run(dag_runner.runs, cell, "kafka", before)
    crash = json.loads((run_dir / "faults.jsonl").read_text().splitlines()[0])
    assert crash["detail"]["between_effect_and_commit"] is True, crash
    verdict = json.loads((run_dir / "checker" / "verdict.json").read_text())
    assert verdict["conforms"] is True, verdict["mismatches"]
    observed = {c["name"]: c["observed"] for c in verdict["checks"]}
    assert observed["effect_duplicate"] > 0
    assert observed["redelivered"] > 0
    assert observed["unprocessed"] == 0
    assert "consumer_exactly_once" in verdict["gx"]["suites"]
    assert verdict["gx"]["agrees_with_anomalies"] is True
    report = dag_runner.reports / "runs" / run_dir.name
    summary = json.loads((report / "summary.json").read_text())
    assert (summary["status"], summary["mode"]) == ("conforms", "commit-after")
    assert summary["metrics"]["records"] == CRASH_RECORDS
    page = (report / "index.html").read_text()
    assert 'class="verdict conforms"' in page
    assert 'id="consumer-half"' in page
    suite = ET.parse(report / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")


def test_nightly_dag_reports_the_negative_control_as_conforming_because_found(
    dag_runner: DagRunner,
) -> None:
    """Through `eoslab orchestrate matrix`, as `make lab` runs it: the cells' phases and the
    matrix on the terminal, Airflow's output in a log file named at the end; a clean baseline
    beside the negative control, and one probe flow diffed on the lab's targets beside the
    cells, in the same report."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "eoslab.orchestration.command", "matrix"),
            *("--scenario", "baseline", "--scenario", "no-idempotence", "--target", "kafka"),
            *("--probe-flow", "fig2"),
        ],
        env=dag_runner.env,
        capture_output=True,
        text=True,
        timeout=DAG_RUN_TIMEOUT_S,
        check=False,
    )
    dag_runner.logs.mkdir(parents=True, exist_ok=True)
    (dag_runner.logs / "nightly.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, tail(done)
    shown = done.stdout.splitlines()
    assert len(shown) <= 20, done.stdout
    for cell in ("baseline", "no-idempotence"):
        assert any(line.strip().startswith(f"{cell}/kafka: conforms") for line in shown), shown
    assert "2 of 2 cells conform. Report:" in done.stdout
    [airflow_log] = re.findall(r"Airflow's log: (\S+);", done.stdout)
    assert "eos_nightly" in Path(airflow_log).read_text()  # what the terminal was spared
    assert "INFO" not in done.stdout

    [night] = list((dag_runner.reports / "nightly").iterdir())
    summary = json.loads((night / "summary.json").read_text())
    assert (summary["cells"], summary["conforming"], summary["conforms"]) == (2, 2, True)
    assert summary["probe_diffs"] == {"flows": 1, "conforming": 1}
    assert '<table id="probe-diffs">' in (night / "index.html").read_text()
    baseline, cell = sorted(summary["outcomes"], key=lambda outcome: outcome["scenario"])
    assert [(c["scenario"], c["target"], c["status"]) for c in (baseline, cell)] == [
        ("baseline", "kafka", "conforms"),
        ("no-idempotence", "kafka", "conforms"),
    ]
    clean = json.loads(
        (dag_runner.reports / "runs" / baseline["run_id"] / "summary.json").read_text()
    )
    assert all(check["observed"] == 0 for check in clean["checks"]), clean["checks"]

    run_report = dag_runner.reports / "runs" / cell["run_id"]
    checks = {c["name"]: c for c in json.loads((run_report / "summary.json").read_text())["checks"]}
    assert checks["duplicate"]["expected"] == ">0"
    assert checks["duplicate"]["observed"] > 0
    assert checks["duplicate"]["conforms"]
    assert checks["duplicate"]["examples"], "the report shows the duplicates it found"
    assert checks["lost"]["observed"] == 0
    assert 'id="anomaly-duplicate"' in (run_report / "index.html").read_text()
    assert night.name in (dag_runner.reports / "index.html").read_text()  # the trend lists it


def test_a_lab_that_is_down_turns_the_health_task_red_with_the_fix(
    dag_runner: DagRunner, tmp_path: Path
) -> None:
    """No broker answers: the DAG run fails at once, in run_scenario's health check, and says
    what to do."""
    env = {
        **dag_runner.env,
        "EOSLAB_LAB_DIR": str(tmp_path / "no-lab"),
        "EOSLAB_PORT_OFFSET": "40000",
    }
    down = DagRunner(env, tmp_path / "runs", tmp_path / "reports", dag_runner.logs)
    done = down.test(
        "eos_scenario", json.dumps({"scenario": "baseline", "target": "kafka"}), "lab-down"
    )
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "LabUnhealthyError" in output
    assert "make lab up" in output
    assert not (tmp_path / "runs").exists()  # nothing ran

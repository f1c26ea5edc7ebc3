"""The Airflow tasks of the eoslab DAGs; each one calls a function of :mod:`steps` or
:mod:`eoslab.report`, so the DAG files in `dags/` only wire them together.

The checker is one task, a Spark Connect client of the lab's warm Spark (no JVM of its own):
it derives the anomalies, validates the Great Expectations suites on its DataFrames and writes
the verdict, all under ``RUN_DIR/checker/``. It fails when the run does not conform, so its
task is red for a non-conforming run; ``publish`` runs anyway, once the run itself ended
(:data:`AFTER_THE_RUN`), and reads what it wrote: the checks, the run's HTML report, the GX
results. It fails, saying so, when the checker left no verdict.

A cell is three tasks (run, check, publish), and each task imports what it uses when it runs:
every task is a process of its own that parses the DAG file (which imports this module) again,
and on two cores those seconds of CPU are the lanes' runs' and checks'.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import TriggerRule, task

from eoslab.orchestration.lanes import lane_held
from eoslab.orchestration.matrix import plan
from eoslab.rundir import cell_name
from eoslab.runtime.airflow import SPARK_CONN
from eoslab.settings import runs_root

log = logging.getLogger(__name__)

RUN_TIMEOUT = timedelta(minutes=20)  # above any scenario's timeout_s plus topic set-up
CHECKER_TIMEOUT = timedelta(minutes=20)
PUBLISH_TIMEOUT = timedelta(minutes=5)
PROBE_TIMEOUT = timedelta(minutes=15)  # every flow on three targets, each bounded
AFTER_THE_RUN = TriggerRule.ALL_DONE
"""Run when the upstream tasks are done, whatever their state (a run that did not happen leaves
no run directory to read: the task then fails, Airflow saying the run task's XCom is missing).
Not ALL_DONE_MIN_ONE_SUCCESS, which says what is meant: Airflow 3.3.2 marks a mapped task
group's tasks with that rule upstream_failed before the group expands, so the nightly DAG's
cells never published (measured on a two-cell toy DAG, nested in a task group or not)."""


class MatrixNotConformingError(RuntimeError):
    """The DAG run's verdicts are in, and at least one cell does not conform."""


@task(execution_timeout=RUN_TIMEOUT)
def run_scenario(
    scenario: str,
    target: str,
    *,
    records: int | None = None,
    seed: int | None = None,
    producer_overrides: dict[str, Any] | None = None,
    mode: str | None = None,
    client: str | None = None,
    group_protocol: str | None = None,
    runs_dir: str | None = None,
) -> str:
    """Check the lab (within seconds, naming the fix, when the target, the chaos proxy or the
    warm Spark is down), then create the topic and run the workloads ∥ nemesis (`eoslab run`)
    once the target's lane is free, and keep its topics for its check on the warm Spark before
    letting the lane go; returns the run dir. The nightly DAG gives it its lane's pool."""
    from eoslab.orchestration import steps

    steps.check_lab(target)
    return steps.run_scenario(
        scenario,
        target,
        records=records,
        seed=seed,
        producer_overrides=producer_overrides,
        mode=mode,
        client=client,
        group_protocol=group_protocol,
        runs_dir=runs_dir,
        keep_on=spark_connect_url(),
    )


# retries=0: a non-conforming run fails this task too, and retrying would only repeat it
@task(execution_timeout=CHECKER_TIMEOUT, retries=0)
def spark_checker(run_dir: str) -> dict[str, Any]:
    """The checker on the ``eoslab_spark`` Spark Connect connection (the lab's warm Spark);
    red when the run does not conform or is invalid."""
    from eoslab.orchestration import steps

    return steps.check_run(run_dir, remote=spark_connect_url())


def spark_connect_url() -> str | None:
    """The Spark Connect server of the ``eoslab_spark`` connection; None when Airflow has no
    such connection (a lab without its warm Spark: the checker then starts its own)."""
    from airflow.exceptions import AirflowNotFoundException
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    try:
        return SparkConnectHook(conn_id=SPARK_CONN).get_connection_url()
    except AirflowNotFoundException:
        return None


@task(trigger_rule=AFTER_THE_RUN, execution_timeout=PUBLISH_TIMEOUT, retries=0)
def publish(run_dir: str) -> dict[str, Any]:
    """What the checker wrote, published: each check logged (expected against observed), the
    run's report written (reports/runs/<run_id>/: HTML, summary.json, junit.xml), the Great
    Expectations results logged; returns the verdict's headline. Red when GX and the anomaly
    tables disagree (a checker bug), the report written first."""
    from eoslab.orchestration import steps
    from eoslab.report.render import write_run_report

    headline = steps.publish_verdict(run_dir)
    index = write_run_report(Path(run_dir))
    log.info("report: %s", index)
    steps.publish_gx(run_dir)
    return headline


@task(execution_timeout=PUBLISH_TIMEOUT, retries=0)
def conformance(headline: dict[str, Any]) -> None:
    """Red when the run does not conform or is invalid, so the DAG run's colour is the
    verdict."""
    if not headline["conforms"]:
        raise MatrixNotConformingError(
            f"{headline['run_id']} {headline['status']}: "
            + "; ".join([*headline["invalid"], *headline["mismatches"]])
        )


@task(execution_timeout=PUBLISH_TIMEOUT)
def plan_cells(request: dict[str, Any], night: str, target: str) -> list[dict[str, Any]]:
    """The matrix cells the DAG run's params select on ``target`` (its lane's; none when the
    matrix leaves the target out); every run dir goes under one folder."""
    from eoslab.orchestration import steps

    runs_dir = str(runs_root() / f"nightly-{night}")
    if not request.get("targets"):  # the targets the lab runs
        request = {**request, "targets": list(steps.lab_config().targets)}
    if target not in request["targets"]:
        log.info("no cells: the matrix leaves %s out", target)
        return []
    cells = [
        {**cell.to_json(), "runs_dir": runs_dir} for cell in plan({**request, "targets": [target]})
    ]
    log.info("%d cells: %s", len(cells), [_cell_key(c) for c in cells])
    return cells


def _cell_key(cell: dict[str, Any]) -> tuple[str, str]:
    """(cell name, target): what a planned cell and a run's outcome share."""
    return (_cell_name(cell), cell["target"])


def _cell_name(cell: dict[str, Any]) -> str:
    return cell_name(
        cell["scenario"], cell["mode"], cell.get("client"), cell.get("group_protocol", "classic")
    )


@task(trigger_rule=TriggerRule.ALL_DONE, execution_timeout=PROBE_TIMEOUT, retries=0)
def probe_diffs(request: dict[str, Any], night: str) -> int:
    """Every probe flow (or the DAG run's ``probe_flows``) on every target the lab runs, when
    its ``probe_diffs`` asks for them, summarised into the night's folder for the report;
    returns how many flows."""
    if not request.get("probe_diffs"):
        log.info("probe diffs not asked for (param probe_diffs)")
        return 0
    folder = runs_root() / f"nightly-{night}"
    folder.mkdir(parents=True, exist_ok=True)
    from eoslab.orchestration import steps
    from eoslab.probe.every_flow import PROBE_DIFFS_FILE, diff_every_flow, write_summaries

    config = steps.lab_config()
    with lane_held(config.state_dir, config.targets, f"the probe diffs of {night}"):
        summaries = diff_every_flow(config, request.get("probe_flows") or None)
    write_summaries(folder / PROBE_DIFFS_FILE, summaries)
    for flow in summaries:
        log.info("probe %s: %s", flow.flow, "as Kafka" if flow.conforms else "DIFFERS")
    return len(summaries)


@task(trigger_rule=TriggerRule.ALL_DONE, execution_timeout=PUBLISH_TIMEOUT, retries=0)
def nightly_report(night: str) -> dict[str, Any]:
    """The matrix report over every run of this DAG run (a cell whose run failed shows as an
    error) and the night's probe diffs, the runs' own pages and the trend; returns the matrix
    summary."""
    from eoslab.probe.every_flow import PROBE_DIFFS_FILE, read_summaries
    from eoslab.report.history import FlakyCell
    from eoslab.report.render import read_summary, write_nightly_report

    folder = runs_root() / f"nightly-{night}"
    run_dirs = sorted(p.parent for p in folder.glob("*/run.json"))
    diffs = read_summaries(folder / PROBE_DIFFS_FILE)
    index = write_nightly_report(run_dirs, name=night, probe_diffs=diffs)
    log.info("matrix report: %s", index)
    summary = read_summary(index)
    for flaky in map(FlakyCell.from_json, summary["flaky"]):
        log.info("flaky: %s", flaky.label)
    return {
        "index": str(index),
        "conforms": summary["conforms"],
        "cells": summary["outcomes"],
        "flaky": summary["flaky"],
        "probe_diffs": [flow.model_dump() for flow in diffs],
    }


@task(execution_timeout=PUBLISH_TIMEOUT, retries=0)
def matrix_conforms(summary: dict[str, Any], planned: list[list[dict[str, Any]]]) -> None:
    """Red unless every planned cell (``planned``: each lane's) has a run, every run conforms
    and every probe flow run answered as Kafka."""
    expected_cells = [cell for lane in planned for cell in lane]
    done = {_cell_key(c) for c in summary["cells"]}
    missing = [_cell_key(c) for c in expected_cells if _cell_key(c) not in done]
    bad = [
        f"{_cell_name(c)}/{c['target']}: {c['message']}"
        for c in summary["cells"]
        if c["status"] != "conforms"
    ]
    bad += [
        f"probe {flow['flow']}: {flow['error'] or '; '.join(flow['unexplained'])}"
        for flow in summary.get("probe_diffs", [])
        if not flow["conforms"]
    ]
    if missing or bad:
        raise MatrixNotConformingError(
            f"matrix {summary['index']}: cells without a run {missing}; not conforming {bad}"
        )

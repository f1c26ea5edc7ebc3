"""eos_nightly: the scenario matrix x targets, every night, then the matrix report.

plan the cells (the params: the "default" matrix, the "full" catalogue, or chosen scenarios
and targets) → for each cell, mapped: lab health → workload ∥ nemesis → the checker's Spark
job → GX results → verdict → the run's report; then every probe flow on every target (param
probe_diffs) → the matrix report with the probe diffs (reports/nightly/<time>/ and the trend
in reports/index.html) → red unless every cell ran and conforms and every flow answered as
Kafka.

A dead broker fails the cell's health check within seconds (retried once after 30 s), and
every task has an execution_timeout: the night ends red with a log that says why, never hangs.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param, task_group

from eoslab.orchestration import tasks
from eoslab.orchestration.matrix import DEFAULT_RECORDS, MATRICES
from eoslab.probe.every_flow import ALL_FLOWS
from eoslab.rundir import HANDLER_MODES, LAB_TARGETS
from eoslab.scenarios.catalogue import catalogue

with DAG(
    dag_id="eos_nightly",
    schedule="@daily",  # midnight UTC; no start_date: the first run is the next midnight, not
    catchup=False,  # one fired the moment the lab comes up
    max_active_runs=1,
    max_active_tasks=1,  # one lab: cells run one after the other
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    render_template_as_native_obj=True,
    dagrun_timeout=timedelta(hours=6),
    tags=["eoslab"],
    doc_md=__doc__,
    params={
        "matrix": Param("full", type="string", enum=list(MATRICES), description="Which matrix."),
        "scenarios": Param(
            [],
            type="array",
            items={"type": "string", "enum": sorted(catalogue())},
            description="Only these scenarios (empty: the matrix's).",
        ),
        "targets": Param(
            [],
            type="array",
            items={"type": "string", "enum": list(LAB_TARGETS)},
            description="Targets (empty: every target the lab runs).",
        ),
        "probe_diffs": Param(
            True,
            type="boolean",
            description="Also play every probe flow on every target and report the diffs.",
        ),
        "probe_flows": Param(
            [],
            type="array",
            items={"type": "string", "enum": list(ALL_FLOWS)},
            description="Only these probe flows (empty: every one).",
        ),
        "modes": Param(
            [],
            type="array",
            items={"type": "string", "enum": list(HANDLER_MODES)},
            description="Run every chosen scenario with consumers in these handler modes "
            "(empty: each scenario's own).",
        ),
        "records": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            description=f"Records per cell (empty: the scenario's; {DEFAULT_RECORDS} in the default matrix).",
        ),
    },
) as dag:

    @task_group
    def cell(
        *,
        scenario: str,
        target: str,
        records: int | None,
        mode: str | None,
        client: str | None,
        group_protocol: str,
        runs_dir: str,
    ) -> None:
        run_dir = tasks.run_scenario(
            scenario=scenario,
            target=target,
            records=records,
            mode=mode,
            client=client,
            group_protocol=group_protocol,
            runs_dir=runs_dir,
        )
        checked = tasks.spark_checker(run_dir)
        tasks.lab_health(target) >> run_dir
        checked >> tasks.gx_validation(run_dir) >> tasks.verdict(run_dir) >> tasks.report(run_dir)

    planned = tasks.plan_cells(request="{{ params }}", night="{{ ts_nodash }}")
    probes = tasks.probe_diffs(request="{{ params }}", night="{{ ts_nodash }}")
    summary = tasks.nightly_report(night="{{ ts_nodash }}")
    cell.expand_kwargs(planned) >> probes >> summary
    tasks.matrix_conforms(summary, planned)

"""eos_nightly: the scenario matrix x targets, every night, then the matrix report.

plan the cells (the params: the "default" matrix, the "full" catalogue, or chosen scenarios
and targets) → a lane per target (the task groups ``lane_kafka``, ``lane_kafka4``,
``lane_refbroker``), side by side: for each of the target's cells, mapped: lab health and
workload ∥ nemesis → the checker's Spark job → the verdict, the run's report, GX results. A
lane's runs take turns (its pool, ``eoslab_lane_<target>``, has one slot; a lock on the target
holds any other DAG's run back too), the other lanes' runs play meanwhile, and each check
starts on the warm Spark as its run ends, beside the runs, two checks at most at once (the pool
``eoslab_checks``). Then every
probe flow on every target (param probe_diffs) → the matrix report with the probe diffs
(reports/nightly/<time>/ and the trend in reports/index.html) → red unless every cell ran and
conforms and every flow answered as Kafka.

A dead broker fails the cell's health check within seconds (retried once after 30 s), and
every task has an execution_timeout: the night ends red with a log that says why, never hangs.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, CronTriggerTimetable, Param, TaskGroup, XComArg, task_group

from eoslab.orchestration import tasks
from eoslab.orchestration.matrix import DEFAULT_RECORDS, MATRICES
from eoslab.probe.every_flow import ALL_FLOWS
from eoslab.rundir import HANDLER_MODES, LAB_TARGETS
from eoslab.runtime.airflow import CHECKS_POOL, lane_pool
from eoslab.scenarios.catalogue import catalogue

RUN_WEIGHT = 1
CHECK_WEIGHT = 2
"""A cell's check and publish outrank the runs: the scheduler examines a run's waiting tasks by
weight, at most max_active_tasks of them a pass, and stops the pass once it queues one. Weighed
as Airflow does by default (a task by what follows it), the hundreds of runs of the full matrix
outrank every check, and a free lane was found every pass: the checks' pool stood empty for
minutes while the checks waited (`make conformance`, 2026-12-07: 18 checks after 102 runs)."""

with DAG(
    dag_id="eos_nightly",
    # midnight UTC, and no start_date: the first run is the next midnight. With Airflow's
    # default (run_immediately=False), a scheduler started less than 2.4 h after a midnight (a
    # tenth of the day) runs that midnight's at once: `make lab` at 00:22 got the full matrix
    # beside its own, and the lanes test timed out behind it (2026-12-07). A midnight passed
    # while the lab was down is settled when it comes up (eoslab.runtime.airflow).
    schedule=CronTriggerTimetable("0 0 * * *", timezone="UTC", run_immediately=timedelta(0)),
    catchup=False,
    max_active_runs=1,
    max_active_tasks=2 * len(LAB_TARGETS),  # a run and a check per lane at most
    # each task its own weight (below), not the sum of what follows it
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30), "weight_rule": "absolute"},
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

    def lane(lane_target: str) -> tuple[XComArg, TaskGroup]:
        """The target's lane: its cells planned, then each of them, their runs in the lane's
        pool (one at a time); returns the lane's cells and the lane."""
        with TaskGroup(group_id=f"lane_{lane_target}") as group:
            cells = tasks.plan_cells(
                request="{{ params }}", night="{{ ts_nodash }}", target=lane_target
            )

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
                run_dir = tasks.run_scenario.override(
                    pool=lane_pool(lane_target), priority_weight=RUN_WEIGHT
                )(
                    scenario=scenario,
                    target=target,
                    records=records,
                    mode=mode,
                    client=client,
                    group_protocol=group_protocol,
                    runs_dir=runs_dir,
                )
                checked = tasks.spark_checker.override(
                    pool=CHECKS_POOL, priority_weight=CHECK_WEIGHT
                )(run_dir)
                checked >> tasks.publish.override(priority_weight=CHECK_WEIGHT)(run_dir)

            cell.expand_kwargs(cells)
        return cells, group

    probes = tasks.probe_diffs(request="{{ params }}", night="{{ ts_nodash }}")
    summary = tasks.nightly_report(night="{{ ts_nodash }}")
    planned = []
    for target in LAB_TARGETS:
        cells, group = lane(target)
        group >> probes
        planned.append(cells)
    probes >> summary
    tasks.matrix_conforms(summary, planned)

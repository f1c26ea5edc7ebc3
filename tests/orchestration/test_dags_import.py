"""The DAG files import cleanly under Airflow 3 and say what the lab needs of them."""

from __future__ import annotations

import json
import subprocess
import sys

from eoslab.rundir import LAB_TARGETS
from eoslab.runtime.airflow import CHECKS_POOL, lane_pool
from eoslab.scenarios.catalogue import catalogue

INSPECT = """
import json
import pendulum
import airflow.timetables.trigger
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.decoders import decode_timetable
from airflow.serialization.encoders import encode_timetable
from airflow.timetables.base import TimeRestriction
bag = DagBag()  # the DAGs folder of the environment
# the nightly's first run as the scheduler computes it for a lab that comes up at 00:22 UTC
nightly = decode_timetable(encode_timetable(bag.dags["eos_nightly"].timetable))
airflow.timetables.trigger.utcnow = lambda: pendulum.datetime(2026, 12, 7, 0, 22, tz="UTC")
first = nightly.next_dagrun_info(
    last_automated_data_interval=None,
    restriction=TimeRestriction(earliest=None, latest=None, catchup=False),
)
print(json.dumps({
    "nightly_first_run_at_0022": first.run_after.isoformat(),
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "dags": {
        dag_id: {
            "schedule": str(dag.schedule),
            "catchup": dag.catchup,
            "params": {k: bag.dags[dag_id].params.get_param(k).schema for k in dag.params},
            "untimed": [t.task_id for t in dag.tasks if t.execution_timeout is None],
            "tasks": sorted(t.task_id for t in dag.tasks),
            "pools": {t.task_id: t.pool for t in dag.tasks},
            "weights": {t.task_id: [t.priority_weight, str(t.weight_rule)] for t in dag.tasks},
        }
        for dag_id, dag in bag.dags.items()
    },
}))
"""


def test_dags_import_without_errors_and_bound_every_task(airflow_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INSPECT],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["errors"] == {}
    assert set(found["dags"]) == {"eos_scenario", "eos_nightly"}
    for dag in found["dags"].values():
        assert dag["untimed"] == []  # a dead broker ends a task, never hangs it

    scenario = found["dags"]["eos_scenario"]
    assert scenario["params"]["scenario"]["enum"] == sorted(catalogue())
    assert scenario["params"]["target"]["enum"] == ["kafka", "kafka4", "refbroker"]
    assert scenario["params"]["producer_overrides"]["type"] == "object"
    assert "integer" in scenario["params"]["records"]["type"]
    assert "integer" in scenario["params"]["seed"]["type"]
    assert "spark_checker" in scenario["tasks"]
    assert "publish" in scenario["tasks"]

    nightly = found["dags"]["eos_nightly"]
    # a lab brought up after a midnight waits for the next one (no full matrix beside `make lab`)
    assert found["nightly_first_run_at_0022"] == "2026-12-08T00:00:00+00:00"
    assert nightly["catchup"] is False
    assert nightly["params"]["matrix"]["enum"] == ["default", "full", "sample"]
    assert "nightly_report" in nightly["tasks"]
    # a lane per target: its cells planned, its runs in its one-slot pool, its checks in the
    # checks' pool
    for target in LAB_TARGETS:
        lane = f"lane_{target}"
        assert {f"{lane}.plan_cells", f"{lane}.cell.spark_checker"} <= set(nightly["tasks"])
        assert nightly["pools"][f"{lane}.cell.run_scenario"] == lane_pool(target)
        assert nightly["pools"][f"{lane}.cell.spark_checker"] == CHECKS_POOL
        # a finished run's check is queued before the next run of any lane (its weight its
        # own, not the sum of what follows it: the lanes test reads the scheduler's)
        weights = nightly["weights"]
        run = weights[f"{lane}.cell.run_scenario"]
        for follower in (f"{lane}.cell.spark_checker", f"{lane}.cell.publish"):
            assert weights[follower][1] == run[1] == "absolute"
            assert weights[follower][0] > run[0]
    assert nightly["pools"]["probe_diffs"] == "default_pool"  # held back by the lanes' locks

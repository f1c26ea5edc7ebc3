"""One AIRFLOW_HOME per test session (SQLite, migrated once), and `airflow dags test` against
the session's lab: the DAG run finds the lab through EOSLAB_LAB_DIR / EOSLAB_PORT_OFFSET and
writes its runs and reports under a temporary folder."""

from __future__ import annotations

import dataclasses
import os

import pytest
from dag_runner import DagRunner

from eoslab.runtime.airflow import AirflowHome
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.ports import free_port


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    root = tmp_path_factory.mktemp("airflow")
    return AirflowHome(
        home=root / "home", api_port=free_port(), lab_dir=root / "no-lab", port_offset=0
    ).prepare()


@pytest.fixture(scope="session")
def airflow_env(airflow_home: AirflowHome) -> dict[str, str]:
    return {**os.environ, **airflow_home.environment()}


@pytest.fixture(scope="session")
def dag_runner(
    lab: LocalRuntime, airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory
) -> DagRunner:
    home = dataclasses.replace(
        airflow_home,
        lab_dir=lab.config.state_dir,
        port_offset=lab.config.port_offset,
        spark_connect_port=lab.config.spark_connect_port,
    )
    out = tmp_path_factory.mktemp("dag-runs")
    env = {
        **os.environ,
        **home.environment(),
        "EOSLAB_RUNS_DIR": str(out / "runs"),
        "EOSLAB_REPORTS_DIR": str(out / "reports"),
    }
    return DagRunner(env, out / "runs", out / "reports", out / "logs")

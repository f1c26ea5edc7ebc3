"""`eoslab lab up` with Airflow: its four components as lab services, the UI on loopback with a
generated admin password, both DAGs registered and unpaused, no log server, nothing left after
`down`. A lab of its own (ZooKeeper and Airflow only) on the test offset + 2000."""

from __future__ import annotations

import dataclasses
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from eoslab.orchestration.scheduler import SchedulerError, call_api
from eoslab.orchestration.tasks import spark_connect_url
from eoslab.runtime import processes
from eoslab.runtime.airflow import SPARK_CONN_VARIABLE
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig

PORT_OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000")) + 2000
READY_TIMEOUT_S = 180.0


def poll(condition: Callable[[], Any], timeout_s: float = READY_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = condition()
        except (OSError, KeyError, ValueError, SchedulerError):  # refused, timed out, HTTP
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"not true within {timeout_s} s: {condition.__doc__}"
        time.sleep(1.0)


@pytest.fixture(scope="module")
def airflow_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("airflow-lab"),
        port_offset=PORT_OFFSET,
        targets=(),
        with_postgres=False,
        with_spark_connect=False,
        with_airflow=True,
    )
    runtime = LocalRuntime(config)
    runtime.up()
    try:
        yield runtime
    finally:
        runtime.down(purge=True)
        assert processes.processes_of(config.state_dir) == []


def test_airflow_components_are_lab_services(airflow_lab: LocalRuntime) -> None:
    status = {s.name: s for s in airflow_lab.status().services}
    for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
        assert status[f"airflow-{component}"].state == "running"
    assert status["airflow-api-server"].ports == {"ui": 8080 + PORT_OFFSET}
    assert airflow_lab.config.airflow_home.parent == airflow_lab.config.state_dir


def test_the_generated_password_is_shown_once_and_logs_in(airflow_lab: LocalRuntime) -> None:
    airflow = airflow_lab.airflow()
    password = airflow.password()
    assert password != "admin"
    assert len(password) >= 12
    assert stat.S_IMODE(airflow.password_file.stat().st_mode) == 0o600
    first, second = airflow.login_banner(), airflow.login_banner()
    assert password in first
    assert password not in second
    assert str(airflow.password_file) in second

    def token() -> str:
        """the API server hands out a token for the generated password"""
        return call_api(
            f"{airflow.url}/auth/token", body={"username": "admin", "password": password}
        )["access_token"]

    assert poll(token)
    with pytest.raises(SchedulerError, match=": 401 "):
        call_api(f"{airflow.url}/auth/token", body={"username": "admin", "password": "admin"})


def test_scheduler_runs_and_both_dags_are_unpaused(airflow_lab: LocalRuntime) -> None:
    airflow = airflow_lab.airflow()

    def components_healthy() -> bool:
        """scheduler, DAG processor and triggerer heartbeat"""
        health = call_api(f"{airflow.url}/api/v2/monitor/health")
        parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
        return all(health[part]["status"] == "healthy" for part in parts)

    poll(components_healthy)

    def token_handed_out() -> str:
        """the API server hands out a token"""
        body = {"username": "admin", "password": airflow.password()}
        return str(call_api(f"{airflow.url}/auth/token", body=body)["access_token"])

    token = poll(token_handed_out)

    def dags() -> dict[str, bool]:
        """the DAG processor has registered eos_scenario and eos_nightly"""
        found = call_api(f"{airflow.url}/api/v2/dags", token=token)["dags"]
        paused = {d["dag_id"]: d["is_paused"] for d in found}
        return paused if {"eos_scenario", "eos_nightly"} <= paused.keys() else {}

    paused = poll(dags)
    assert paused == {"eos_scenario": False, "eos_nightly": False}  # no examples either


def test_airflow_listens_on_loopback_only(airflow_lab: LocalRuntime) -> None:
    # The services and all their descendants (Airflow's setproctitle overwrites the environment
    # that processes_of reads, and the API server's worker runs in a session of its own).
    services = [psutil.Process(s.pid) for s in airflow_lab.status().services if s.pid]
    pids = {p.pid for s in services for p in (s, *s.children(recursive=True))}
    listening = [
        c.laddr
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]
    assert any(addr.port == 8080 + PORT_OFFSET for addr in listening)
    assert all(addr.ip in ("127.0.0.1", "::ffff:127.0.0.1") for addr in listening), listening
    assert not {8793, 8794} & {addr.port for addr in listening}  # no task log servers


def test_task_environment_points_at_the_lab(airflow_lab: LocalRuntime) -> None:
    env = airflow_lab.airflow().environment()
    assert env["EOSLAB_LAB_DIR"] == str(airflow_lab.config.state_dir)
    assert env["EOSLAB_PORT_OFFSET"] == str(PORT_OFFSET)
    assert Path(env["AIRFLOW__CORE__DAGS_FOLDER"]).name == "dags"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert SPARK_CONN_VARIABLE not in env  # a lab without its warm Spark: the checker's own


def test_the_spark_connection_is_the_labs_warm_spark(
    airflow_lab: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the DAGs' checker task connects to, read through the Spark provider's own hook; a
    connection the user gives (a cluster's Spark Connect) wins over the lab's."""
    port = 15002 + PORT_OFFSET
    warm = dataclasses.replace(airflow_lab.airflow(), spark_connect_port=port)
    monkeypatch.setenv(SPARK_CONN_VARIABLE, warm.environment()[SPARK_CONN_VARIABLE])
    assert spark_connect_url() == f"sc://127.0.0.1:{port}/"

    cluster = '{"conn_type": "spark_connect", "host": "spark.example", "port": 15002}'
    monkeypatch.setenv(SPARK_CONN_VARIABLE, cluster)
    assert warm.environment()[SPARK_CONN_VARIABLE] == cluster
    assert spark_connect_url() == "sc://spark.example:15002/"

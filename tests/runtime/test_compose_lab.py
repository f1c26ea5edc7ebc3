"""The compose lab, for real: its images built (or reused) on this machine's Docker engine, the
lab up in containers, a producer-half cell (its fault a kill -9 through the Docker API) and a
consumer-half cell run against its Kafka 3.9 and checked on its own warm Spark, the verdict's
checks the same as the local runtime's for the same scenario, and nothing left behind by
`lab down`.

The engine is started when it is installed but not running (and stopped again at the end if
this module started it); `make setup` installs it for `make test` (EOSLAB_DOCKER=1). The lab
runs every target (Kafka 4's nodes formatted in containers on the way up), PostgreSQL and the
warm Spark, without Airflow (as `make lab` brings it up), on ports of its own
(:data:`COMPOSE_OFFSET`), beside the session lab.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from pyspark.sql import SparkSession

from eoslab.clock import wait_until
from eoslab.rundir import LAB_TARGETS, HandlerMode, Verdict, VerdictStatus
from eoslab.runtime.compose import PROJECT_LABEL, ComposeRuntime, remove_left_behind
from eoslab.runtime.engine import check_can_run, engine_client, engine_pid
from eoslab.runtime.lab import ProcessFaults
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.status import LabError
from eoslab.runtime.topology import LabConfig
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import execute
from eoslab.verify.checker import verify_run

pytestmark = [pytest.mark.lab, pytest.mark.timeout(900)]
"""The first test builds the images and starts the containers (205 s on an idle two-core machine
on 2026-12-06): beyond the suite's 360 s per test on a slower one."""

COMPOSE_OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000")) + 2500
"""The compose lab's ports: clear of the session lab's and the other tests' labs."""
PRODUCER_CELL = ("leader-kill", 1500)
CONSUMER_CELL: tuple[str, HandlerMode] = ("consumer-crash-before-commit", "dedup-table")


@pytest.fixture(scope="module")
def engine() -> Iterator[None]:
    """The machine's engine; started here (and stopped at the end) if it was not running."""
    try:
        engine_client(say=print, start=False)
        started = None
    except LabError:
        engine_client(say=print)
        started = engine_pid()
    yield
    if started is not None:
        os.kill(started, signal.SIGTERM)
        assert wait_until(lambda: exited(started), 30.0), "the engine started here did not stop"


def exited(pid: int) -> bool:
    """Gone, or a zombie (this process started it: it is reaped when this one ends)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(scope="module")
def compose_lab(engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeRuntime]:
    root = tmp_path_factory.mktemp("compose")
    root.chmod(0o755)
    config = LabConfig(
        state_dir=root / "lab",
        port_offset=COMPOSE_OFFSET,
        targets=LAB_TARGETS,
        with_postgres=True,
        with_spark_connect=True,
        with_airflow=False,
    )
    runtime = ComposeRuntime(config, runs_dir=root / "runs", reports_dir=root / "reports")
    for folder in (runtime.runs_dir, runtime.reports_dir):
        folder.mkdir()
    runtime.up()
    try:
        yield runtime
    finally:
        runtime.down(purge=True)


def test_a_port_taken_by_a_local_lab_is_refused_as_the_local_runtime_refuses_it(
    engine: None, lab: LocalRuntime, tmp_path: Path
) -> None:
    compose = ComposeRuntime(
        LabConfig(
            state_dir=tmp_path / "lab",
            port_offset=lab.config.port_offset,
            targets=("kafka",),
            with_airflow=False,
        )
    )
    with pytest.raises(LabError, match=r"^port\(s\) already in use on 127\.0\.0\.1: zookeeper:"):
        compose.up()
    client = engine_client(say=print, start=False)
    assert (
        client.containers.list(all=True, filters={"label": f"{PROJECT_LABEL}={compose.project}"})
        == []
    )


def test_an_engine_that_cannot_run_a_container_names_the_failed_step(engine: None) -> None:
    """Stands in for an engine without permissions or cgroups (not to be had here): the check
    `lab up` makes before anything starts names the step that failed, in one line."""
    client = engine_client(say=print, start=False)
    with pytest.raises(
        LabError,
        match=r"^the Docker engine cannot run the lab's containers: could not create a "
        r"container on the host's network \(eoslab/no-such-image:0\): [^\n]+$",
    ):
        check_can_run(client, "eoslab/no-such-image:0")


def run_and_check(
    lab: ProcessFaults,
    config: LabConfig,
    runs: Path,
    scenario: str,
    *,
    records: int | None = None,
    mode: HandlerMode | None = None,
    spark: SparkSession | None = None,
) -> Verdict:
    """One cell on a lab, checked (on ``spark``, else the lab's own warm Spark); every fault
    must have taken effect."""
    result = execute(
        find_scenario(scenario),
        "kafka",
        runtime=lab,
        config=config,
        runs_root=runs,
        records=records,
        mode=mode,
        seed=7,
        show_progress=False,
    )
    assert result.invalid_because == []
    assert result.info.faults
    assert all(f.took_effect for f in result.info.faults)
    remote = None if spark else config.spark_remote
    return verify_run(result.run_dir.path, spark=spark, remote=remote)


@pytest.fixture(scope="module")
def producer_verdict(compose_lab: ComposeRuntime) -> Verdict:
    scenario, records = PRODUCER_CELL
    return run_and_check(
        compose_lab, compose_lab.config, compose_lab.runs_dir, scenario, records=records
    )


def test_the_lab_runs_in_containers_as_the_local_topology(compose_lab: ComposeRuntime) -> None:
    status = compose_lab.status()
    assert status.up, [(s.name, s.state, s.healthy) for s in status.services]
    assert [s.name for s in status.services] == [s.name for s in compose_lab.config.services()]
    assert [s.ports for s in status.services] == [s.ports for s in compose_lab.config.services()]
    assert status.clusters["kafka"].brokers == [1, 2, 3]
    assert status.clusters["kafka4"].brokers == [1, 2, 3]
    assert status.clusters["kafka4"].controller in (1, 2, 3)  # the quorum has a leader
    assert status.clusters["refbroker"].reachable
    client = engine_client(say=print, start=False)
    containers = client.containers.list(filters={"label": f"{PROJECT_LABEL}={compose_lab.project}"})
    assert {c.name for c in containers} == {
        f"{compose_lab.project}-{s.name}" for s in compose_lab.config.services()
    }
    for container in containers:
        assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    for service in status.services:  # the pid the status shows is the container's process
        assert service.pid is not None, service.name
        assert psutil.pid_exists(service.pid), service.name


def test_a_producer_cell_conforms_its_kill_through_the_docker_api(
    producer_verdict: Verdict,
) -> None:
    assert producer_verdict.status is VerdictStatus.CONFORMS, [
        m.summary for m in producer_verdict.mismatches
    ]


def test_a_consumer_cell_conforms(compose_lab: ComposeRuntime) -> None:
    scenario, mode = CONSUMER_CELL
    verdict = run_and_check(
        compose_lab, compose_lab.config, compose_lab.runs_dir, scenario, mode=mode
    )
    assert verdict.status is VerdictStatus.CONFORMS, [m.summary for m in verdict.mismatches]
    assert {c.name: c.observed for c in verdict.checks}["redelivered"] > 0


def test_the_verdict_checks_are_the_local_runtimes(
    producer_verdict: Verdict, lab: LocalRuntime, spark: SparkSession, tmp_path: Path
) -> None:
    scenario, records = PRODUCER_CELL
    local = run_and_check(lab, lab.config, tmp_path, scenario, records=records, spark=spark)

    def checks(verdict: Verdict) -> list[tuple[str, str, bool]]:
        return sorted((c.name, c.expected, c.conforms) for c in verdict.checks)

    assert checks(local) == checks(producer_verdict)
    assert local.status is producer_verdict.status


def test_a_compose_lab_left_behind_is_taken_down_by_the_sweep(
    compose_lab: ComposeRuntime, tmp_path: Path
) -> None:
    """A half of `make test` stopped mid compose test (a SIGTERM skips the fixtures'
    finalizers) leaves its compose lab's containers: the sweep of the half's folder
    (scripts/test.sh) takes down every compose lab under it, and no other lab."""
    tmp_path.chmod(0o755)
    left = ComposeRuntime(
        LabConfig(
            state_dir=tmp_path / "half" / "lab",
            port_offset=COMPOSE_OFFSET + 300,
            targets=("refbroker",),
            with_postgres=False,
            with_spark_connect=False,
            with_airflow=False,
        )
    )
    left.up()
    client = engine_client(say=print, start=False)
    project = {"label": f"{PROJECT_LABEL}={left.project}"}
    running = sorted(c.name for c in client.containers.list(filters=project))
    assert {f"{left.project}-proxy", f"{left.project}-refbroker"} <= set(running)
    assert remove_left_behind(tmp_path) == running
    assert client.containers.list(all=True, filters=project) == []
    assert client.networks.list(filters=project) == []
    assert remove_left_behind(tmp_path) == []
    assert compose_lab.status().up  # the module's lab, in a folder elsewhere, untouched


def test_down_leaves_no_container_network_or_volume(compose_lab: ComposeRuntime) -> None:
    compose_lab.down(purge=True)
    client = engine_client(say=print, start=False)
    project = {"label": f"{PROJECT_LABEL}={compose_lab.project}"}
    assert client.containers.list(all=True, filters=project) == []
    assert client.networks.list(filters=project) == []
    assert client.volumes.list(filters=project) == []
    assert not compose_lab.config.state_dir.exists()

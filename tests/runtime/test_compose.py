"""The compose project a lab runs: the local runtime's topology, commands and health checks in
containers on the host's network, and what the image builder reads (no engine needed here;
tests/runtime/test_compose_lab.py starts the lab for real)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import docker
import pytest
import yaml
from docker.errors import DockerException
from packaging.requirements import Requirement

from eoslab.runtime import compose_file, images
from eoslab.runtime.compose import ComposeRuntime, project_name
from eoslab.runtime.container import service_command
from eoslab.runtime.engine import engine_client
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.status import LabError
from eoslab.runtime.topology import Kind, LabConfig
from eoslab.settings import project_root
from eoslab.workload.drivers.librdkafka import OLDER_CLIENTS

COMMITTED = project_root() / "compose" / "docker-compose.yml"


@pytest.fixture(scope="module")
def lab_config(tmp_path_factory: pytest.TempPathFactory) -> LabConfig:
    return LabConfig(
        state_dir=tmp_path_factory.mktemp("compose-lab"),
        port_offset=700,
        targets=("kafka", "kafka4", "refbroker"),
        with_postgres=True,
        with_spark_connect=True,
        with_airflow=True,
    )


@pytest.fixture(scope="module")
def spec(lab_config: LabConfig) -> dict:
    return yaml.safe_load(compose_file.text(lab_config))


def test_the_committed_file_is_the_default_labs_rendering() -> None:
    assert COMMITTED.read_text() == compose_file.text(compose_file.default_lab()), (
        "compose/docker-compose.yml is stale: regenerate it with "
        "`.venv/bin/python -m eoslab.runtime.compose_file > compose/docker-compose.yml`"
    )


def test_every_service_of_the_topology_is_a_container_on_the_hosts_network(
    spec: dict, lab_config: LabConfig
) -> None:
    services = spec["services"]
    assert set(services) == {s.name for s in lab_config.services()} | {compose_file.TASK}
    for name, service in services.items():
        assert service["network_mode"] == "host", name
        assert "ports" not in service, name
        assert "networks" not in service, name
        assert service["user"] == "${EOSLAB_USER}"
        assert "${EOSLAB_LAB_DIR}:${EOSLAB_LAB_DIR}" in service["volumes"]
    assert services[compose_file.TASK]["profiles"] == [compose_file.TASK]  # not started by up


def test_jvm_services_run_the_local_command_lines_with_the_images_jars(
    spec: dict, lab_config: LabConfig
) -> None:
    local = LocalRuntime(lab_config)
    lab, checkout = str(lab_config.state_dir), str(project_root())
    jvms = [s for s in lab_config.services() if s.kind in compose_file.IMAGE_OF_KIND]
    assert {s.kind for s in jvms} == {Kind.ZOOKEEPER, Kind.KAFKA, Kind.KAFKA4}
    for service in jvms:
        command = spec["services"][service.name]["command"]
        expected = [
            arg.replace(lab, "${EOSLAB_LAB_DIR}").replace(checkout, images.IMAGE_HOME)
            for arg in local.argv(service)[1:]
        ]
        assert command == ["java", *expected], service.name
        image = images.lab_images()[compose_file.IMAGE_OF_KIND[service.kind]].ref
        assert spec["services"][service.name]["image"] == image


def test_python_services_run_the_local_command_computed_in_their_container(
    spec: dict, lab_config: LabConfig
) -> None:
    local = LocalRuntime(lab_config)
    python = [s for s in lab_config.services() if s.kind not in compose_file.IMAGE_OF_KIND]
    for service in python:
        assert spec["services"][service.name]["command"] == [
            *compose_file.PYTHON_SERVICE,
            service.name,
        ]
        environment = spec["services"][service.name]["environment"]
        assert environment["EOSLAB_PORT_OFFSET"] == str(lab_config.port_offset)
        assert environment["EOSLAB_TARGETS"] == "kafka,kafka4,refbroker"
        assert environment["EOSLAB_RUNTIME"] == "compose"
        if service.kind is not Kind.AIRFLOW:  # Airflow's environment needs its prepared home
            argv, env = service_command(local, service)
            assert argv == local.argv(service)
            assert Path(argv[0]).is_absolute(), argv  # the container execs it without PATH
            assert env["EOSLAB_TARGETS"] == "kafka,kafka4,refbroker"
    airflow = [s.name for s in python if s.kind is Kind.AIRFLOW]
    assert len(airflow) == 4
    for name in [*airflow, compose_file.TASK]:  # the nemesis reaches the engine
        assert "${EOSLAB_DOCKER_SOCKET}:/var/run/docker.sock" in spec["services"][name]["volumes"]


def test_healthchecks_probe_the_local_health_checks_ports(
    spec: dict, lab_config: LabConfig
) -> None:
    for service in lab_config.services():
        check = spec["services"][service.name].get("healthcheck")
        ports = [p for label, p in service.ports.items() if label != "advertised"]
        if service.kind is Kind.PROXY:
            ports = [listen for _, listen, _ in lab_config.proxy_routes()]
        if not ports:
            assert check is None, service.name
            continue
        probe = check["test"][-1]
        for port in ports:
            assert f"/dev/tcp/127.0.0.1/{port}" in probe, (service.name, port)
        if service.kind is Kind.ZOOKEEPER:
            assert "ruok" in probe


def test_each_lab_folder_has_a_project_of_its_own(tmp_path: Path) -> None:
    assert project_name(tmp_path / "a") != project_name(tmp_path / "b")
    assert project_name(tmp_path / "a") == project_name(tmp_path / "a")


def test_the_compose_runtime_refuses_what_only_the_local_runtime_runs(tmp_path: Path) -> None:
    for config in (
        LabConfig(state_dir=tmp_path, brokers=1),
        LabConfig(state_dir=tmp_path, direct_listener=True),
    ):
        with pytest.raises(LabError, match="local runtime"):
            ComposeRuntime(config)


def test_the_python_image_installs_the_virtualenvs_own_pins() -> None:
    from importlib import metadata

    pins = dict(pin.split("==") for pin in images.pinned_requirements())
    for name in ("pyspark", "apache-airflow", "confluent-kafka", "great-expectations"):
        assert pins[name] == metadata.version(name), name
    assert "psycopg-binary" in pins  # an extra of a dependency (psycopg[binary]) followed
    assert not {"pytest", "ruff", "mypy"} & pins.keys()  # eoslab's dev extra left out
    older = sorted(OLDER_CLIENTS.values())
    assert sorted(images.OLDER_CLIENTS) == older
    assert all(Requirement(pin).specifier for pin in images.BUILD_REQUIREMENTS)


def test_an_images_digest_follows_its_inputs(tmp_path: Path) -> None:
    jar, text = tmp_path / "a-1.0.jar", tmp_path / "log4j.properties"
    jar.write_bytes(b"x" * 10)
    text.write_text("a=1\n")
    files = [("lib/a-1.0.jar", jar), ("log4j.properties", text)]
    before = images.digest(["Dockerfile", "parent"], files)
    assert before == images.digest(["Dockerfile", "parent"], files)
    assert before != images.digest(["Dockerfile", "another parent"], files)
    text.write_text("a=2\n")
    after_text = images.digest(["Dockerfile", "parent"], files)
    assert after_text != before
    jar.write_bytes(b"y" * 10)  # a jar is its name and size: its name carries its version
    assert images.digest(["Dockerfile", "parent"], files) == after_text


def test_the_base_comes_from_the_mirror_apt_uses(tmp_path: Path) -> None:
    deb822 = tmp_path / "debian.sources"
    deb822.write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    one_line = tmp_path / "sources.list"
    one_line.write_text("deb [arch=amd64] http://other.example/debian bookworm main\n")
    assert images.apt_mirrors([deb822]) == (
        "http://mirror.example/debian",
        "http://mirror.example/debian-security",
    )
    assert images.apt_mirrors([one_line])[0] == "http://other.example/debian"
    assert images.apt_mirrors([tmp_path / "none"]) == (
        images.DEFAULT_MIRROR,
        images.DEFAULT_SECURITY_MIRROR,
    )


def test_compose_says_plainly_when_there_is_no_engine(tmp_path: Path) -> None:
    env = {
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
        "PATH": str(Path(sys.executable).parent),
        "EOSLAB_LAB_DIR": str(tmp_path / "lab"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "eoslab.cli", "lab", "up", "--runtime", "compose"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    error_lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(error_lines) <= 2, done.stderr  # one error, wrapped at most once
    assert "no Docker engine answers" in done.stderr
    assert "install" in done.stderr


def test_the_images_cli_refuses_unknown_images() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eoslab.runtime.images", "kafka9"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().startswith("error: unknown image(s) ['kafka9']")


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    """Debian's docker-compose (what `make setup` installs; the compose runtime drives it where
    `docker compose` is missing) takes the file, with a lab's variables."""
    compose = shutil.which("docker-compose")
    assert compose, "docker-compose validates the file: apt-get install docker-compose"
    variables = {name: str(tmp_path / name) for name in compose_file.VARIABLES}
    done = subprocess.run(
        [compose, "-f", str(COMMITTED), "config", "--quiet"],
        env={**os.environ, **variables, "EOSLAB_USER": "0:0", "EOSLAB_DOCKER_GID": "0"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _unreachable(reason: str) -> Callable[[], docker.DockerClient]:
    def factory() -> docker.DockerClient:
        raise DockerException(f"Error while fetching server API version: {reason}")

    return factory


def test_an_engine_out_of_reach_is_said_with_its_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which line `lab up --runtime compose` says for each way the engine is out of reach
    (the messages' logic; the real engine's are in test_compose_lab.py)."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    denied = _unreachable("('Connection aborted.', PermissionError(13, 'Permission denied'))")
    with pytest.raises(LabError, match=r"refuses this user \(permission denied\); add the user"):
        engine_client(print, denied)
    absent = _unreachable("('Connection aborted.', FileNotFoundError(2, 'No such file'))")
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LabError, match=r"installed but not running.*sudo systemctl start docker"):
        engine_client(print, absent)
    with pytest.raises(LabError, match=r"^the Docker engine is not running .* starts it as root"):
        engine_client(print, absent, start=False)
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
    with pytest.raises(LabError, match=r"^no Docker engine answers at tcp://.*unset DOCKER_HOST"):
        engine_client(print, absent)

"""The compose file users start with Docker: same topology as the local runtime, loopback only."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docker.errors import NotFound

from eoslab.runtime.compose import ComposeRuntime, compose_file
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.status import LabError
from eoslab.runtime.topology import LabConfig
from eoslab.settings import project_root


@pytest.fixture(scope="module")
def spec() -> dict:
    return yaml.safe_load(compose_file().read_text())


AIRFLOW_SUPPORT = {"airflow-init"}
"""Compose-only: Airflow's one-shot migration (its database is the lab's PostgreSQL, which
holds the consumers' sinks too)."""


def test_services_match_the_local_topology(spec: dict) -> None:
    local = {s.name for s in LabConfig(with_airflow=True).services()}
    assert set(spec["services"]) == local | AIRFLOW_SUPPORT
    for i in (1, 2, 3):
        assert spec["services"][f"kafka-{i}"]["environment"]["BROKER_ID"] == str(i)
        assert spec["services"][f"kafka4-{i}"]["environment"]["NODE_ID"] == str(i)
    # one KRaft cluster: the three nodes formatted with one cluster id (16 bytes, base64url)
    (cluster_id,) = {
        spec["services"][f"kafka4-{i}"]["environment"]["CLUSTER_ID"] for i in (1, 2, 3)
    }
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_every_port_is_published_on_loopback(spec: dict) -> None:
    published = [port for service in spec["services"].values() for port in service.get("ports", [])]
    assert published
    assert all(port.startswith("127.0.0.1:") for port in published), published
    host_ports = {int(port.split(":")[1]) for port in published}
    # Clients reach Kafka and the reference broker only through the proxy, as locally.
    assert {listen for _, listen, _ in LabConfig().proxy_routes()} <= host_ports


def test_healthchecks_and_start_order(spec: dict) -> None:
    services = spec["services"]
    long_running = {name: s for name, s in services.items() if name != "airflow-init"}
    assert all("healthcheck" in s for s in long_running.values())
    for i in (1, 2, 3):
        assert services[f"kafka-{i}"]["depends_on"]["zookeeper"]["condition"] == "service_healthy"
    assert set(services["proxy"]["depends_on"]) == {
        *(f"kafka-{i}" for i in (1, 2, 3)),
        *(f"kafka4-{i}" for i in (1, 2, 3)),
        "refbroker",
    }
    assert not services["zookeeper"].get("depends_on")


def test_airflow_runs_the_local_components_on_loopback(spec: dict) -> None:
    """Same components as `eoslab lab up`, with the host's network (so tasks reach the lab
    on 127.0.0.1 like local runs), listening on loopback, log servers off."""
    services = spec["services"]
    airflow = [s for s in LabConfig(with_airflow=True).services() if s.component]
    assert airflow
    for service in airflow:
        compose = services[service.name]
        assert compose["command"][0] == service.component
        assert compose["network_mode"] == "host"
        assert "ports" not in compose
        env = compose["environment"]
        assert env["AIRFLOW__API__HOST"] == "127.0.0.1"
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
        assert (
            compose["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
        )
        if service.component in ("scheduler", "triggerer"):
            assert "--skip-serve-logs" in compose["command"]
    assert "listen_addresses=127.0.0.1" in services["postgres"]["command"]
    assert services["airflow-init"]["command"] == ["init"]


def test_proxy_routes_match_the_local_ones(spec: dict) -> None:
    routes = [arg for arg in spec["services"]["proxy"]["command"] if arg.startswith("--route=")]
    expected = {
        f"--route={name}=0.0.0.0:{listen}={name}:{upstream}"
        for name, listen, upstream in LabConfig().proxy_routes()
    }
    assert set(routes) == expected


def test_images_are_built_from_the_services_folder(spec: dict) -> None:
    builds = [s["build"] for s in spec["services"].values() if "build" in s]
    assert builds
    for build in builds:
        dockerfile = (compose_file().parent / build["context"] / build["dockerfile"]).resolve()
        assert dockerfile.is_file(), dockerfile
        assert dockerfile.parent.parent == project_root() / "services"


def test_docker_compose_accepts_the_file() -> None:
    compose = shutil.which("docker-compose")
    assert compose, (
        "docker-compose is needed to validate the compose file: apt-get install docker-compose"
    )
    done = subprocess.run(
        [compose, "-p", "eoslab", "-f", str(compose_file()), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_compose_runtime_says_plainly_when_there_is_no_engine(tmp_path: Path) -> None:
    env = {
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
        "PATH": str(Path(sys.executable).parent),
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
    assert "no Docker engine" in done.stderr


def test_both_runtimes_offer_the_nemesis_verbs() -> None:
    verbs = ("up", "down", "status", "logs", "kill", "pause", "resume", "restart")
    for runtime in (LocalRuntime, ComposeRuntime):
        assert all(callable(getattr(runtime, verb, None)) for verb in verbs), runtime


class FakeContainer:
    def __init__(self, name: str, calls: list[tuple[str, str, object]]) -> None:
        self.name = name
        self.calls = calls
        self.attrs = {"State": {"Running": True, "Paused": False, "Health": {"Status": "healthy"}}}

    def kill(self, signal: str) -> None:
        self.calls.append(("kill", self.name, signal))

    def pause(self) -> None:
        self.calls.append(("pause", self.name, None))

    def unpause(self) -> None:
        self.calls.append(("unpause", self.name, None))

    def restart(self, timeout: int) -> None:
        self.calls.append(("restart", self.name, timeout))

    def logs(self, tail: int) -> bytes:
        return f"last {tail} lines of {self.name}".encode()


class FakeContainers:
    def __init__(self, running: set[str]) -> None:
        self.calls: list[tuple[str, str, object]] = []
        self.running = running

    def get(self, name: str) -> FakeContainer:
        if name not in self.running:
            raise NotFound(f"no container {name}")
        return FakeContainer(name, self.calls)


class FakeDocker:
    """The part of the Docker SDK the compose runtime uses."""

    def __init__(self, running: set[str]) -> None:
        self.containers = FakeContainers(running)

    def ping(self) -> bool:
        return True


def test_compose_verbs_act_on_the_services_containers() -> None:
    client = FakeDocker({"eoslab-kafka-2-1", "eoslab-refbroker-1"})
    runtime = ComposeRuntime(LabConfig(port_offset=0), docker_client=lambda: client)  # type: ignore[arg-type,return-value]
    runtime.kill("kafka-2")
    runtime.pause("refbroker")
    runtime.resume("refbroker")
    runtime.restart("kafka-2")
    assert client.containers.calls == [
        ("kill", "eoslab-kafka-2-1", "SIGKILL"),
        ("pause", "eoslab-refbroker-1", None),
        ("unpause", "eoslab-refbroker-1", None),
        ("restart", "eoslab-kafka-2-1", int(runtime.config.stop_grace_s)),
    ]
    assert runtime.logs("kafka-2", 7) == "last 7 lines of eoslab-kafka-2-1"


def test_compose_runs_every_target_or_says_so() -> None:
    with pytest.raises(LabError, match=r"runs every target.*local runtime"):
        ComposeRuntime(LabConfig(port_offset=0, targets=("kafka4",)))


def test_compose_verbs_name_the_fix_for_unknown_or_missing_services() -> None:
    runtime = ComposeRuntime(LabConfig(port_offset=0), docker_client=lambda: FakeDocker(set()))  # type: ignore[arg-type,return-value]
    with pytest.raises(KeyError, match="kafka-1, kafka-2"):
        runtime.kill("kafka-9")
    with pytest.raises(LabError, match="eoslab lab up --runtime compose"):
        runtime.pause("kafka-1")


def test_compose_status_reads_the_containers_state() -> None:
    client = FakeDocker({"eoslab-zookeeper-1"})
    runtime = ComposeRuntime(  # type: ignore[arg-type]
        LabConfig(port_offset=0, with_airflow=False),
        docker_client=lambda: client,  # type: ignore[return-value]
    )
    states = {s.name: (s.state, s.healthy) for s in runtime.status().services}
    assert states["zookeeper"] == ("running", True)
    assert states["kafka-1"] == ("stopped", False)

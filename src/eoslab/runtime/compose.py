"""The compose runtime: the same lab in containers, for users with a Docker engine.

Up and down go through `docker compose`; the nemesis verbs act on the containers through the
Docker SDK, so kill / pause / resume / restart mean the same as in the local runtime. The lab
folder holds the PostgreSQL password as in the local runtime (generated before the first
start); the compose file mounts it from ``$EOSLAB_LAB_DIR``, which `docker compose` is given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import docker
from docker.errors import DockerException, NotFound
from docker.models.containers import Container

from eoslab.rundir import LAB_TARGETS
from eoslab.runtime.lab import ProcessObservation, ProcessState
from eoslab.runtime.postgres import PostgresServer, ensure_password
from eoslab.runtime.status import LabError, LabStatus, ServiceStatus, cluster_view
from eoslab.runtime.topology import LabConfig
from eoslab.settings import LAB_DIR, PORT_OFFSET, TARGETS, BasePort, project_root

PROJECT = "eoslab"


def compose_file() -> Path:
    return project_root() / "compose" / "docker-compose.yml"


class ComposeRuntime:
    name = "compose"

    def __init__(
        self,
        config: LabConfig | None = None,
        docker_client: Callable[[], docker.DockerClient] = docker.from_env,
    ) -> None:
        self.config = config or LabConfig()
        self._docker_client = docker_client
        if self.config.port_offset:
            raise LabError(
                f"the compose runtime publishes the documented ports; unset {PORT_OFFSET}"
            )
        if self.config.targets != LAB_TARGETS:
            raise LabError(
                f"the compose runtime runs every target ({', '.join(LAB_TARGETS)}); unset "
                f"{TARGETS}, or choose targets with the local runtime"
            )

    def _client(self) -> docker.DockerClient:
        try:
            client = self._docker_client()
            client.ping()
        except DockerException as error:
            raise LabError(
                "no Docker engine is reachable, so the compose runtime cannot run here "
                f"({error.__class__.__name__}). Use the default local runtime (`eoslab lab up`), "
                "or start Docker and retry."
            ) from error
        return client

    def _compose(self, *args: str) -> None:
        self._client()
        command = self._compose_command()
        done = subprocess.run(
            [*command, "-p", PROJECT, "-f", str(compose_file()), *args],
            env=self.compose_environment(),
            check=False,
        )
        if done.returncode != 0:
            raise LabError(f"`docker compose {' '.join(args)}` failed (exit {done.returncode})")

    @staticmethod
    def _compose_command() -> list[str]:
        if shutil.which("docker"):
            return ["docker", "compose"]
        if shutil.which("docker-compose"):
            return ["docker-compose"]
        raise LabError("neither `docker compose` nor `docker-compose` is installed")

    def _container(self, name: str) -> Container:
        self.config.service(name)
        try:
            return self._client().containers.get(f"{PROJECT}-{name}-1")
        except NotFound as error:
            raise LabError(
                f"{name} has no container; run `eoslab lab up --runtime compose`"
            ) from error

    def compose_environment(self) -> dict[str, str]:
        """What `docker compose` runs with: the lab folder, whose PostgreSQL password the
        compose file mounts (generated here the first time, as the local runtime does)."""
        postgres = PostgresServer(self.config.postgres_root, self.config.port(BasePort.POSTGRES))
        ensure_password(postgres.password_file)
        return {**os.environ, LAB_DIR: str(self.config.state_dir)}

    def up(self) -> LabStatus:
        self._compose("up", "--detach", "--build", "--wait")
        return self.status()

    def down(self, purge: bool = False) -> None:
        self._compose("down", *(["--volumes"] if purge else []))

    def status(self) -> LabStatus:
        client = self._client()
        services = []
        for service in self.config.services():
            try:
                container = client.containers.get(f"{PROJECT}-{service.name}-1")
                state = container.attrs["State"]
                running = (
                    "paused"
                    if state.get("Paused")
                    else "running"
                    if state.get("Running")
                    else "stopped"
                )
                healthy = state.get("Health", {}).get("Status") == "healthy"
                pid = state.get("Pid") or None
            except NotFound:
                running, healthy, pid = "stopped", False, None
            services.append(
                ServiceStatus(
                    service.name, service.kind.value, running, healthy, pid, service.ports, None
                )
            )
        clusters = {
            target: cluster_view(self.config.bootstrap(target), kraft=target == "kafka4")
            for target in self.config.targets
        }
        return LabStatus(self.name, f"docker project {PROJECT}", services, clusters)

    def logs(self, name: str, lines: int = 50) -> str:
        return self._container(name).logs(tail=lines).decode("utf-8", errors="replace")

    def observe(self, name: str) -> ProcessObservation:
        container = self._container(name)
        container.reload()
        pid = int(container.attrs.get("State", {}).get("Pid") or 0) or None
        if container.status == "paused":
            return ProcessObservation(pid, ProcessState.STOPPED)
        if container.status == "running":
            return ProcessObservation(pid, ProcessState.RUNNING)
        return ProcessObservation(None, ProcessState.DEAD)

    def kill(self, name: str) -> None:
        self._container(name).kill(signal="SIGKILL")

    def pause(self, name: str) -> None:
        self._container(name).pause()

    def resume(self, name: str) -> None:
        self._container(name).unpause()

    def restart(self, name: str) -> None:
        self._container(name).restart(timeout=int(self.config.stop_grace_s))

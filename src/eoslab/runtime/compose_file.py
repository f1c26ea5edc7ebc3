"""The compose project of a lab: one container per service of its topology
(:meth:`LabConfig.services`), running what the local runtime runs.

Every container uses the host's network and binds 127.0.0.1 as the local processes do (no
bridge, no published ports, no container addresses: the lab's loopback-only rule), runs as the
user who brought the lab up, and sees the lab folder (and the runs' and reports' folders) at
the path it has on the host, so that configs, data and logs are where the local runtime keeps
them and every path a run records is valid on both sides.

- ZooKeeper, Kafka 3.9 and Kafka 4 run the local runtime's own command line, with the jars of
  their image (``/opt/eoslab/services/...``) for those of the checkout; the runtime renders
  their configs into the lab folder first, as the local runtime does.
- The Python services (reference broker, proxy, PostgreSQL, the warm Spark, Airflow's parts)
  run ``python -m eoslab.runtime.container SERVICE`` in the eoslab image: the local runtime's
  config and command for that service, computed in the container.
- ``task`` (not started by ``up``: ``compose run`` starts it) runs a command beside the lab in
  the eoslab image, with the Docker socket for the nemesis: `make lab RUNTIME=compose`'s
  matrix, Airflow's database set-up.

Paths and the user come from :data:`VARIABLES` (the lab folder's ``compose/.env``), so the file
does not depend on the checkout: ``compose/docker-compose.yml`` is this rendering of the
default lab (``python -m eoslab.runtime.compose_file > compose/docker-compose.yml``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from eoslab.rundir import LAB_TARGETS
from eoslab.runtime.images import IMAGE_HOME, lab_images
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import Kind, LabConfig, Service
from eoslab.settings import (
    HOST,
    LAB_DIR,
    PORT_OFFSET,
    REPORTS_DIR,
    RUNS_DIR,
    RUNTIME,
    TARGETS,
    WITH_AIRFLOW,
    WITH_POSTGRES,
    WITH_SPARK_CONNECT,
    project_root,
)

VARIABLES = (
    "COMPOSE_PROJECT_NAME",
    LAB_DIR,
    RUNS_DIR,
    REPORTS_DIR,
    "EOSLAB_USER",
    "EOSLAB_DOCKER_SOCKET",
    "EOSLAB_DOCKER_GID",
)
"""What the file leaves to the lab (its ``.env``): the compose project, the folders shared with
the host, ``uid:gid`` of the user, the Docker socket and its group (for the nemesis)."""
TASK = "task"
IMAGE_OF_KIND = {
    Kind.ZOOKEEPER: "kafka",
    Kind.KAFKA: "kafka",
    Kind.KAFKA4: "kafka4",
}
"""The JVM services' images; every other service runs the eoslab image."""
PYTHON_SERVICE = ["python", "-m", "eoslab.runtime.container"]
HEALTH_INTERVAL = "10s"
HEADER = """\
# The eoslab lab in containers, as `eoslab lab up --runtime compose` (and `make lab
# RUNTIME=compose`) runs it: generated from the lab's topology by eoslab.runtime.compose_file
# (this file: the default lab; a lab's own is <lab folder>/compose/docker-compose.yml). Do not
# edit: regenerate with `.venv/bin/python -m eoslab.runtime.compose_file > compose/docker-compose.yml`.
# Every container uses the host's network and binds 127.0.0.1, runs as ${EOSLAB_USER} and sees
# the lab folder at its own path; the variables come from <lab folder>/compose/.env.
"""


def var(name: str) -> str:
    return "${" + name + "}"


def jvm_command(local: LocalRuntime, service: Service) -> list[str]:
    """The local runtime's command line of a JVM service, as its image runs it (the lab
    folder a variable of the file)."""
    return in_image(local.argv(service), {str(local.config.state_dir): var(LAB_DIR)})


def in_image(argv: list[str], paths: dict[str, str] | None = None) -> list[str]:
    """A local JVM command line with the image's java and jars (and ``paths`` replaced)."""
    replaced = {str(project_root() / "services"): f"{IMAGE_HOME}/services", **(paths or {})}

    def mapped(arg: str) -> str:
        for local, image in replaced.items():
            arg = arg.replace(local, image)
        return arg

    return ["java", *map(mapped, argv[1:])]


def healthcheck(config: LabConfig, service: Service) -> dict[str, Any] | None:
    """Docker's view of the local runtime's health check (what `docker ps` shows; the runtime
    itself waits on the local checks): ZooKeeper answers ``ruok``, the proxy listens on every
    route, any other service on each of its own ports."""
    if service.kind is Kind.ZOOKEEPER:
        port = service.ports["client"]
        probe = f"exec 3<>/dev/tcp/{HOST}/{port} && echo ruok >&3 && grep -q imok <&3"
    else:
        if service.kind is Kind.PROXY:
            ports = [listen for _, listen, _ in config.proxy_routes()] + [service.ports["control"]]
        else:
            ports = [port for label, port in service.ports.items() if label != "advertised"]
        if not ports:
            return None
        probe = " && ".join(f"exec 3<>/dev/tcp/{HOST}/{port}" for port in ports)
    return {
        "test": ["CMD", "bash", "-c", probe],
        "interval": HEALTH_INTERVAL,
        "timeout": "5s",
        "retries": 30,
    }


def lab_environment(config: LabConfig) -> dict[str, str]:
    """What a Python service or task reads its lab from (LabConfig's settings), the shared
    folders, and that the lab runs in containers (the nemesis acts on them)."""

    def flag(on: bool) -> str:
        return "1" if on else "0"

    return {
        "HOME": "/tmp",
        "PYTHONUNBUFFERED": "1",
        LAB_DIR: var(LAB_DIR),
        RUNS_DIR: var(RUNS_DIR),
        REPORTS_DIR: var(REPORTS_DIR),
        PORT_OFFSET: str(config.port_offset),
        TARGETS: ",".join(config.targets),
        WITH_POSTGRES: flag(config.with_postgres),
        WITH_SPARK_CONNECT: flag(config.with_spark_connect),
        WITH_AIRFLOW: flag(config.with_airflow),
        RUNTIME: "compose",
    }


def _container(config: LabConfig, image: str, *, python: bool) -> dict[str, Any]:
    lab = var(LAB_DIR)
    volumes = [f"{lab}:{lab}", f"{lab}/compose/passwd:/etc/passwd:ro"]
    if python:
        volumes += [f"{var(name)}:{var(name)}" for name in (RUNS_DIR, REPORTS_DIR)]
    return {
        "image": image,
        "network_mode": "host",
        "init": True,
        "user": var("EOSLAB_USER"),
        "environment": lab_environment(config) if python else {"HOME": "/tmp"},
        "volumes": volumes,
        "stop_grace_period": f"{config.stop_grace_s:.0f}s",
        "restart": "no",
    }


def _with_docker(container: dict[str, Any]) -> dict[str, Any]:
    """The Docker socket, for what runs the nemesis (Airflow's tasks, the task container)."""
    return {
        **container,
        "volumes": [*container["volumes"], f"{var('EOSLAB_DOCKER_SOCKET')}:/var/run/docker.sock"],
        "group_add": [var("EOSLAB_DOCKER_GID")],
    }


def render(config: LabConfig) -> dict[str, Any]:
    """The compose project of the lab ``config`` describes."""
    images = {name: image.ref for name, image in lab_images().items()}
    local = LocalRuntime(config)
    services: dict[str, Any] = {}
    for service in config.services():
        image = IMAGE_OF_KIND.get(service.kind)
        container = _container(config, images[image or "eoslab"], python=image is None)
        if service.kind is Kind.AIRFLOW:
            container = _with_docker(container)
        services[service.name] = {
            "container_name": f"{var('COMPOSE_PROJECT_NAME')}-{service.name}",
            **container,
            "command": (jvm_command(local, service) if image else [*PYTHON_SERVICE, service.name]),
        }
        if check := healthcheck(config, service):
            services[service.name]["healthcheck"] = check
    services[TASK] = {
        **_with_docker(_container(config, images["eoslab"], python=True)),
        "profiles": [TASK],
    }
    return {"services": services}


def text(config: LabConfig) -> str:
    """The file: :data:`HEADER` and the project as YAML."""

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return HEADER + yaml.dump(render(config), Dumper=Dumper, sort_keys=False, width=100)


def default_lab() -> LabConfig:
    """The lab compose/docker-compose.yml shows: every target and service, documented ports."""
    return LabConfig(
        state_dir=Path("/eoslab-lab"),
        port_offset=0,
        targets=LAB_TARGETS,
        with_postgres=True,
        with_spark_connect=True,
        with_airflow=True,
    )


if __name__ == "__main__":
    sys.stdout.write(text(default_lab()))

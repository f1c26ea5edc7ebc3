"""The compose runtime: the same lab in containers, for users with a Docker engine.

``up`` reaches the engine (starting it when it is installed but not running, as root), builds or
reuses the images (:mod:`eoslab.runtime.images`), writes the lab's compose project into the lab
folder (``compose/``: the file of :mod:`eoslab.runtime.compose_file`, its ``.env``, the
containers' ``passwd``) and brings it up with `docker compose` (or Debian's `docker-compose`)
as the local runtime brings its processes up: the same configs rendered into the same folder,
Kafka 4's nodes formatted first, ZooKeeper first and awaited, then the rest, each awaited by
the local runtime's own health checks, then the clusters' (brokers registered, a quorum
leader). ``status`` is the local runtime's, read from the containers; the nemesis verbs act on
containers through the Docker API (kill -9, the cgroup freezer's pause, stop and start), and
wait as the local runtime's do. ``down`` stops the brokers before ZooKeeper, removes every
container of the project (one-offs too) and its network; ``--purge`` removes its volumes and
the lab folder.

A compose project per lab folder (``eoslab-<digest of its path>``), so a test lab never
touches a user's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from functools import cache
from pathlib import Path

import docker
from docker.models.containers import Container

from eoslab.admin import metadata_brokers
from eoslab.clock import wait_until
from eoslab.console import console
from eoslab.runtime import compose_file
from eoslab.runtime.airflow import AirflowHome
from eoslab.runtime.engine import DEFAULT_SOCKET, Say, check_can_run, engine_client
from eoslab.runtime.images import Builder
from eoslab.runtime.lab import ProcessObservation, ProcessState
from eoslab.runtime.local import LocalRuntime, new_cluster_id
from eoslab.runtime.postgres import ensure_password
from eoslab.runtime.status import LabError, LabStatus, ServiceStatus, cluster_view
from eoslab.runtime.topology import (
    BROKERS,
    COMPOSE_RECORD,
    Kind,
    LabConfig,
    Service,
    parse_targets,
)
from eoslab.runtime.zookeeper import registered_brokers
from eoslab.settings import LAB_DIR, reports_root, runs_root

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
FOLDER = COMPOSE_RECORD.parent.name
"""In the lab folder: the project's file, its .env, the containers' passwd, the record."""
ONE_OFF_TIMEOUT_S = 300.0
KAFKA4_FORMAT_HEAP = "256m"
SIGNAL_SETTLE_S = 10.0


def project_name(state_dir: Path) -> str:
    """The lab folder's compose project: ``eoslab-`` and a digest of its path."""
    return "eoslab-" + hashlib.sha256(str(state_dir).encode()).hexdigest()[:8]


def _say(line: str) -> None:
    console.print(line, highlight=False, soft_wrap=True)


@cache
def compose_command() -> tuple[str, ...]:
    """`docker compose` (v2) where the plugin works, else Debian's `docker-compose` (1.29),
    told to print errors only (not a line per container it creates)."""
    if shutil.which("docker"):
        probe = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, check=False, timeout=30
        )
        if probe.returncode == 0:
            return ("docker", "compose")
    if shutil.which("docker-compose"):
        return ("docker-compose", "--log-level", "ERROR")
    raise LabError(
        "neither `docker compose` nor `docker-compose` is installed: apt-get install "
        "docker-compose (`make setup RUNTIME=compose` does it as root)"
    )


def recorded_config(state_dir: Path) -> LabConfig | None:
    """The config the compose lab in ``state_dir`` was brought up with, if one is up there."""
    try:
        recorded = json.loads((state_dir / COMPOSE_RECORD).read_text())
        return LabConfig(
            state_dir=state_dir,
            port_offset=int(recorded["port_offset"]),
            targets=parse_targets(recorded["targets"]),
            with_postgres=bool(recorded["with_postgres"]),
            with_spark_connect=bool(recorded["with_spark_connect"]),
            with_airflow=bool(recorded["with_airflow"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ComposeRuntime:
    name = "compose"

    def __init__(
        self,
        config: LabConfig | None = None,
        *,
        runs_dir: Path | None = None,
        reports_dir: Path | None = None,
        docker_client: Callable[[], docker.DockerClient] = docker.from_env,
        say: Say = _say,
    ) -> None:
        if config is None:
            config = LabConfig()
            config = recorded_config(config.state_dir) or config
        if config.brokers != BROKERS or config.direct_listener:
            raise LabError(
                f"the compose runtime runs the lab's topology ({BROKERS} Kafka brokers, no "
                "DIRECT listener); a smaller cluster or the DIRECT listener is the local "
                "runtime's"
            )
        self.config = config
        self.project = project_name(config.state_dir)
        self.folder = config.state_dir / FOLDER
        self.runs_dir = (runs_dir or runs_root()).resolve()
        self.reports_dir = (reports_dir or reports_root()).resolve()
        self.say = say
        self._factory = docker_client
        self._docker: docker.DockerClient | None = None
        self._local = LocalRuntime(config)
        """The local runtime of the same lab: its configs, health checks and cluster checks."""

    # ---------------------------------------------------------------- engine, project
    def _client(self, start: bool = False) -> docker.DockerClient:
        if self._docker is None:
            self._docker = engine_client(self.say, self._factory, start=start)
        return self._docker

    def variables(self) -> dict[str, str]:
        """The compose file's variables for this lab (its ``.env``)."""
        docker_host = os.environ.get("DOCKER_HOST", f"unix://{DEFAULT_SOCKET}")
        socket = docker_host.removeprefix("unix://")
        return {
            "COMPOSE_PROJECT_NAME": self.project,
            LAB_DIR: str(self.config.state_dir),
            "EOSLAB_RUNS_DIR": str(self.runs_dir),
            "EOSLAB_REPORTS_DIR": str(self.reports_dir),
            "EOSLAB_USER": f"{os.getuid()}:{os.getgid()}",
            "EOSLAB_DOCKER_SOCKET": socket,
            "EOSLAB_DOCKER_GID": str(os.stat(socket).st_gid if os.path.exists(socket) else 0),
        }

    def _compose_argv(self, *args: str) -> list[str]:
        """`docker compose ARGS` on the lab's project."""
        compose = str(self.folder / "docker-compose.yml")
        return [*compose_command(), "-p", self.project, "-f", compose, *args]

    def _compose_env(self) -> dict[str, str]:
        return {**os.environ, **self.variables()}

    def _compose(self, *args: str) -> None:
        """`docker compose ARGS`; LabError with the end of its output if it fails."""
        done = subprocess.run(
            self._compose_argv(*args),
            env=self._compose_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise LabError(
                f"`docker compose {' '.join(args[:3])}` failed (exit {done.returncode}):\n{tail}"
            )

    def _write_project(self) -> None:
        """The compose file, its .env, the containers' passwd (the user must have a name:
        PostgreSQL and Java's user lookups ask), the JVMs' configs and the lab's record."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "docker-compose.yml").write_text(compose_file.text(self.config))
        env = "".join(f"{key}={value}\n" for key, value in self.variables().items())
        (self.folder / ".env").write_text(env)
        uid, gid = os.getuid(), os.getgid()
        users = [
            "root:x:0:0:root:/root:/bin/bash",
            "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh",
        ]
        if uid not in (0, 65534):
            users.append(f"eoslab:x:{uid}:{gid}:eoslab:/tmp:/bin/sh")
        (self.folder / "passwd").write_text("\n".join(users) + "\n")
        for service in self.config.services():
            if service.kind in compose_file.IMAGE_OF_KIND:
                self._local._write_config(service)
        record = {
            "port_offset": self.config.port_offset,
            "targets": list(self.config.targets),
            **{key: value for key, value in asdict(self.config).items() if key.startswith("with_")},
        }
        (self.config.state_dir / COMPOSE_RECORD).write_text(json.dumps(record, indent=2))

    def _images(self) -> list[str]:
        kinds = {service.kind for service in self.config.services()}
        jvm = {
            compose_file.IMAGE_OF_KIND[kind] for kind in kinds & compose_file.IMAGE_OF_KIND.keys()
        }
        return ["debian", *sorted(jvm), "eoslab"]

    # ---------------------------------------------------------------- containers
    def _containers(self, **labels: str) -> list[Container]:
        filters = [f"{PROJECT_LABEL}={self.project}", *(f"{k}={v}" for k, v in labels.items())]
        return self._client().containers.list(all=True, filters={"label": filters})

    def _container(self, name: str) -> Container:
        self.config.service(name)  # unknown names get the list of services
        found = self._containers(**{SERVICE_LABEL: name})
        running = [c for c in found if c.name == f"{self.project}-{name}"]
        if not running:
            raise LabError(f"{name} has no container; run `eoslab lab up --runtime compose`")
        return running[0]

    def _failure(self, name: str, what: str) -> LabError:
        return LabError(
            f"{name} {what}; last lines of `docker logs {self.project}-{name}`:\n{self.logs(name, 25)}"
        )

    # ---------------------------------------------------------------- up / down
    def up(self) -> LabStatus:
        client = self._client(start=True)
        if [c for c in self._containers() if c.status in ("running", "paused")]:
            raise LabError(
                f"the compose lab in {self.config.state_dir} is already running (project "
                f"{self.project}); see `eoslab lab status --runtime compose`, or stop it with "
                "`eoslab lab down --runtime compose`"
            )
        self._local._preflight()  # the Kafka jars fetched, no local lab here, the ports free
        images = Builder(client, self.say).ensure(self._images())
        check_can_run(client, images["debian"])
        # the password before the server's container makes its cluster: the health checks
        # (from the host) log in with it from the first poll on
        if self.config.with_postgres:
            ensure_password(self._local.postgres().password_file)
        self._write_project()
        try:
            self._one_offs()
            services = self.config.services()
            first = [s for s in services if s.kind is Kind.ZOOKEEPER]
            for group in (first, [s for s in services if s.kind is not Kind.ZOOKEEPER]):
                if group:
                    self._compose("up", "--detach", "--no-build", *(s.name for s in group))
                    for service in group:
                        self._await(service)
            self._local._await_cluster()
        except LabError:
            self._remove_all(purge=False)
            (self.config.state_dir / COMPOSE_RECORD).unlink(missing_ok=True)
            raise
        return self.status()

    def _one_offs(self) -> None:
        """What must run once before the services start, side by side: Kafka 4's nodes
        formatted (the lab's cluster id, made on the first format), Airflow's database."""
        runs: list[tuple[str, list[str]]] = []
        nodes = [
            s
            for s in self.config.services()
            if s.kind is Kind.KAFKA4
            and not (self.config.state_dir / s.name / "data" / "meta.properties").exists()
        ]
        if nodes:
            id_file = self.config.state_dir / "kafka4-cluster-id"
            if not id_file.exists():
                id_file.write_text(new_cluster_id() + "\n")
            cluster_id = id_file.read_text().strip()
            for node in nodes:
                properties = self.config.state_dir / node.name / "server.properties"
                format_argv = self._local._java(
                    node, "kafka.tools.StorageTool", KAFKA4_FORMAT_HEAP, "format",
                    "--cluster-id", cluster_id, "--config", properties,
                )  # fmt: skip
                runs.append((node.name, compose_file.in_image(format_argv)))
        if self.config.with_airflow:
            runs.append((compose_file.TASK, [*compose_file.PYTHON_SERVICE, "--prepare-airflow"]))
        started = [
            (service, self._compose_popen("run", "--rm", "-T", "--no-deps", service, *argv))
            for service, argv in runs
        ]
        for service, process in started:
            try:
                output, _ = process.communicate(timeout=ONE_OFF_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
            if process.returncode != 0:
                what = "Airflow's set-up" if service == compose_file.TASK else "formatting"
                tail = "\n".join(output.splitlines()[-20:])
                raise LabError(f"{service}: {what} failed (exit {process.returncode}):\n{tail}")

    def _compose_popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self._compose_argv(*args),
            env=self._compose_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def _await(self, service: Service) -> None:
        container = self._container(service.name)

        def ready() -> bool:
            container.reload()
            if container.status not in ("running", "created"):
                raise self._failure(service.name, f"exited during start-up ({container.status})")
            return self._local._healthy(service)

        if not wait_until(ready, self.config.up_timeout_s):
            raise self._failure(service.name, f"not healthy after {self.config.up_timeout_s:.0f} s")

    def down(self, purge: bool = False) -> None:
        """Stop everything (the brokers together, ZooKeeper last) and remove every container
        of the lab; ``purge`` removes its volumes and the lab folder too."""
        try:
            self._client()
        except LabError:
            running = False  # no engine: nothing of the lab runs
        else:
            running = True
        if running:
            self._remove_all(purge)
        (self.config.state_dir / COMPOSE_RECORD).unlink(missing_ok=True)
        if purge and self.config.state_dir.exists():
            shutil.rmtree(self.config.state_dir)

    def _remove_all(self, purge: bool) -> None:
        if (self.folder / "docker-compose.yml").is_file():
            grace = str(int(self.config.stop_grace_s))
            brokers = [s.name for s in self.config.services() if s.kind is not Kind.ZOOKEEPER]
            for paused in self._containers():
                if paused.status == "paused":
                    paused.unpause()
            if brokers:
                self._compose("stop", "--timeout", grace, *brokers)
            self._compose(
                "down", "--remove-orphans", "--timeout", grace, *(["--volumes"] if purge else [])
            )
        client = self._client()
        for container in self._containers():  # one-offs and anything compose did not know
            container.remove(force=True)
        project = {"label": [f"{PROJECT_LABEL}={self.project}"]}
        for network in client.networks.list(filters=project):
            network.remove()
        if purge:
            for volume in client.volumes.list(filters=project):
                volume.remove(force=True)

    # ---------------------------------------------------------------- status
    def status(self) -> LabStatus:
        containers = {c.name: c for c in self._containers()}
        services = []
        for service in self.config.services():
            container = containers.get(f"{self.project}-{service.name}")
            state = "stopped"
            if container is not None and container.status in ("running", "paused"):
                state = "running" if container.status == "running" else "paused"
            pid = None if state == "stopped" else container.attrs["State"].get("Pid") or None  # type: ignore[union-attr]
            services.append(
                ServiceStatus(
                    name=service.name,
                    kind=service.kind.value,
                    state=state,
                    healthy=state == "running" and self._local._healthy(service),
                    pid=pid,
                    ports=service.ports,
                    log=None,
                )
            )
        timeout_s = 5.0 if any(s.state != "stopped" for s in services) else 0.5
        clusters = {
            target: cluster_view(
                self.config.bootstrap(target), timeout_s=timeout_s, kraft=target == "kafka4"
            )
            for target in self.config.targets
        }
        return LabStatus(self.name, str(self.config.state_dir), services, clusters)

    def logs(self, name: str, lines: int = 50) -> str:
        return self._container(name).logs(tail=lines).decode("utf-8", errors="replace")

    def airflow(self) -> AirflowHome:
        """The lab's Airflow home (in the lab folder, as the local runtime's)."""
        return self._local.airflow()

    # ---------------------------------------------------------------- nemesis verbs
    def observe(self, name: str) -> ProcessObservation:
        container = self._container(name)
        pid = int(container.attrs.get("State", {}).get("Pid") or 0) or None
        if container.status == "paused":
            return ProcessObservation(pid, ProcessState.STOPPED)
        if container.status == "running":
            return ProcessObservation(pid, ProcessState.RUNNING)
        return ProcessObservation(None, ProcessState.DEAD)

    def kill(self, name: str) -> None:
        """kill -9 of the container's processes: it stops without shutdown (a frozen one is
        thawed first, as SIGKILL reaches a stopped process)."""
        container = self._container(name)
        if container.status == "paused":
            container.unpause()
        if container.status in ("running", "paused"):
            container.kill(signal="SIGKILL")
            container.wait(timeout=SIGNAL_SETTLE_S)

    def pause(self, name: str) -> None:
        """The cgroup freezer: every process of the container frozen, its sockets open."""
        container = self._container(name)
        if container.status != "running":
            raise LabError(f"{name} is not running")
        container.pause()

    def resume(self, name: str) -> None:
        container = self._container(name)
        if container.status != "paused":
            raise LabError(f"{name} is not paused")
        container.unpause()

    def restart(self, name: str) -> None:
        """Stop (gracefully when it runs) and start again with the same config and data; a
        broker is waited for as the local runtime waits for it (its registration expired,
        then registered again)."""
        service = self.config.service(name)
        container = self._container(name)
        if container.status == "paused":
            container.unpause()
        container.stop(timeout=int(self.config.stop_grace_s))
        if service.kind is Kind.KAFKA:
            wait_until(lambda: service.broker_id not in self._registered(), 30.0, 0.5)
        container.start()
        self._await(service)
        if service.kind in (Kind.KAFKA, Kind.KAFKA4):
            wait_until(
                lambda: service.broker_id in self._registered(service.kind),
                self.config.up_timeout_s,
                0.5,
            )

    def _registered(self, kind: Kind = Kind.KAFKA) -> set[int]:
        """Kafka 3.9's brokers registered in ZooKeeper; Kafka 4's nodes in metadata."""
        if kind is Kind.KAFKA:
            return registered_brokers(self.config.zookeeper_connect)
        return metadata_brokers(self.config.kafka4_bootstrap)

    # ---------------------------------------------------------------- tasks
    def warm_up_spark(self) -> str:
        """One check in the warm Spark's container, in the background (what the local lab's
        `lab up` starts beside its Spark): its output in the lab's spark-warmup.log."""
        log = self._local.log_path("spark-warmup")
        log.parent.mkdir(parents=True, exist_ok=True)
        self._container("spark-connect").exec_run(
            ["sh", "-c", f"exec python -m eoslab.orchestration.warmup >> '{log}' 2>&1"], detach=True
        )
        return f"The warm Spark is warming up in the background (log: {log})."

    def task(self, argv: list[str]) -> int:
        """``argv`` in a container of the eoslab image beside the lab (its folders, the
        host's network, the Docker socket): its exit code; a terminal when this has one."""
        tty = [] if sys.stdin.isatty() and sys.stdout.isatty() else ["-T"]
        run = self._compose_argv("run", "--rm", *tty, "--no-deps", compose_file.TASK, *argv)
        return subprocess.run(run, env=self._compose_env(), check=False).returncode


def remove_left_behind(root: Path) -> list[str]:
    """Take down every compose lab whose folder lies under ``root`` and still has containers
    (a test session that died before its labs' teardown: a SIGTERM skips the fixtures'
    finalizers, and the engine keeps the containers, their ports and their volumes); the
    names of the containers removed. Nothing when no engine answers: then nothing runs."""
    removed: list[str] = []
    for project_file in sorted(root.rglob(f"{FOLDER}/docker-compose.yml")):
        state_dir = project_file.parent.parent
        config = recorded_config(state_dir) or LabConfig(state_dir=state_dir)
        runtime = ComposeRuntime(config, say=lambda line: None)
        try:
            left = runtime._containers()
        except LabError:
            break
        if left:
            runtime.down()
            removed += sorted(container.name for container in left)
    return removed


def main(argv: list[str] | None = None) -> int:
    """``python -m eoslab.runtime.compose task -- COMMAND...``: a command beside the compose lab
    of this lab folder, in a container of the eoslab image (`make lab RUNTIME=compose` runs
    its matrix so: through Airflow, in a container)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("verb", choices=["task"])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        runtime = ComposeRuntime()
        if not (runtime.config.state_dir / COMPOSE_RECORD).is_file():
            raise LabError(
                f"no compose lab is up in {runtime.config.state_dir}; "
                "run `eoslab lab up --runtime compose` first"
            )
        return runtime.task(command)
    except LabError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""The Docker engine the compose runtime drives: reached, started when it is installed but not
running (as root), and checked able to run what the lab needs, each failure said in one line
with its fix.

Started by eoslab, the engine runs as Debian's ``docker.io`` can on a machine without systemd
(a CI container, say): ``dockerd`` with :data:`ENGINE_FLAGS`, its log in :data:`ENGINE_LOG`. The
lab's containers use the host's network only, so the engine needs neither a bridge nor NAT
rules. With systemd, ``systemctl start docker`` starts it instead. It keeps running after
``lab down``, as an engine a user started would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import docker
from docker.errors import DockerException
from requests.exceptions import RequestException

from eoslab.clock import wait_until
from eoslab.console import log_tail
from eoslab.runtime.status import LabError

ENGINE_FLAGS = ("--storage-driver=overlay2", "--iptables=false", "--bridge=none")
ENGINE_LOG = Path("/var/log/eoslab-dockerd.log")
DEFAULT_SOCKET = "/var/run/docker.sock"
START_TIMEOUT_S = 60.0
INSTALL = (
    "install Debian's engine and compose (apt-get install docker.io docker-compose; "
    "`make setup RUNTIME=compose` does it as root) or Docker's own (docs.docker.com/engine/install)"
)

Say = Callable[[str], None]
"""Where the compose runtime's progress lines go (the engine started, images built)."""


def _reach(factory: Callable[[], docker.DockerClient]) -> docker.DockerClient | Exception:
    try:
        client = factory()
        client.ping()
    except (DockerException, RequestException) as error:
        return error
    return client


def engine_client(
    say: Say,
    factory: Callable[[], docker.DockerClient] = docker.from_env,
    *,
    start: bool = True,
) -> docker.DockerClient:
    """A client of a running engine; one started first (``start``) when the engine is
    installed, not running, and this is root on the default socket. LabError otherwise,
    naming the fix."""
    reached = _reach(factory)
    if isinstance(reached, docker.DockerClient):
        return reached
    where = os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    reason = str(reached)
    if "Permission denied" in reason or isinstance(reached, PermissionError):
        raise LabError(
            f"the Docker engine at {where} refuses this user (permission denied); add the user "
            "to the docker group (usermod -aG docker $USER, then log in again) or run as root"
        )
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise LabError(f"no Docker engine answers at {where} and none is installed: {INSTALL}")
    if where != f"unix://{DEFAULT_SOCKET}":
        raise LabError(
            f"no Docker engine answers at {where} (DOCKER_HOST); start that one, or unset "
            f"DOCKER_HOST for the one installed here ({dockerd})"
        )
    if not start:
        raise LabError(
            f"the Docker engine is not running (nothing answers at {where}); "
            "`eoslab lab up --runtime compose` starts it as root, or: systemctl start docker"
        )
    if os.geteuid() != 0:
        raise LabError(
            "the Docker engine is installed but not running, and starting it needs root: "
            "sudo systemctl start docker (without systemd: sudo dockerd &)"
        )
    _start_engine(dockerd)

    def answers() -> docker.DockerClient | None:
        reached = _reach(factory)
        return reached if isinstance(reached, docker.DockerClient) else None

    client = wait_until(answers, START_TIMEOUT_S, interval_s=0.5)
    if client is None:
        raise LabError(
            f"the Docker engine did not answer within {START_TIMEOUT_S:.0f} s of starting; "
            f"{ENGINE_LOG} ends with:\n{log_tail(ENGINE_LOG, 15)}"
        )
    say(f"engine: started the Docker engine (dockerd, log {ENGINE_LOG})")
    return client


def _start_engine(dockerd: str) -> None:
    if Path("/run/systemd/system").is_dir() and shutil.which("systemctl"):
        subprocess.run(["systemctl", "start", "docker"], capture_output=True, check=False)
        return
    ENGINE_LOG.parent.mkdir(parents=True, exist_ok=True)
    with ENGINE_LOG.open("ab") as log:
        subprocess.Popen(
            [dockerd, *ENGINE_FLAGS],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def engine_pid() -> int | None:
    """The pid of a dockerd eoslab started (its pid file), for those who stop what they start
    (the compose test)."""
    try:
        return int(Path("/var/run/docker.pid").read_text())
    except (OSError, ValueError):
        return None


def check_can_run(client: docker.DockerClient, image: str) -> None:
    """A container of ``image`` starts on the host's network, is frozen and thawed (the
    nemesis' pause), and is killed: one line naming the step that failed."""
    step = "create a container on the host's network"
    container = None
    try:
        container = client.containers.create(
            image, ["sleep", "30"], network_mode="host", labels={"org.eoslab.check": "engine"}
        )
        steps: list[tuple[str, Callable[[], object]]] = [
            ("start it", container.start),
            ("pause it (the cgroup freezer)", container.pause),
            ("unpause it", container.unpause),
            ("kill it", lambda: container.kill("SIGKILL")),
        ]
        for what, act in steps:
            step = what
            act()
    except DockerException as error:
        raise LabError(
            f"the Docker engine cannot run the lab's containers: could not {step} "
            f"({image}): {str(error).strip().splitlines()[0]}"
        ) from error
    finally:
        if container is not None:
            with contextlib.suppress(DockerException):
                container.remove(force=True)

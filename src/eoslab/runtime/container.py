"""A Python service of the compose lab, inside its container (the eoslab image): the local
runtime's own config and command line for it, computed here, where the image's paths are
(``python -m eoslab.runtime.container SERVICE``, each such container's command).

The lab is the one the container's environment names (EOSLAB_LAB_DIR, EOSLAB_PORT_OFFSET,
EOSLAB_TARGETS, EOSLAB_WITH_*: what :class:`LabConfig` reads), the folder at its host path. As
the local runtime does before it starts a service, the service's config is written first
(PostgreSQL's cluster created, as ``nobody`` under root), then the process replaces this one
(with the environment the local runtime gives it). ``--prepare-airflow`` sets Airflow's home and
database up once, before its four components start side by side.
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys

from eoslab.runtime.airflow import AirflowSetupError
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.spark import spark_environment
from eoslab.runtime.status import LabError
from eoslab.runtime.topology import Kind, LabConfig, Service
from eoslab.settings import TARGETS


def _become(user: str) -> None:
    """Drop root for ``user`` (PostgreSQL refuses root), with no supplementary group."""
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)


def service_command(local: LocalRuntime, service: Service) -> tuple[list[str], dict[str, str]]:
    """The local runtime's command line of ``service`` and the environment it adds."""
    env = {"PYTHONUNBUFFERED": "1", TARGETS: ",".join(local.config.targets)}
    if service.kind is Kind.AIRFLOW:
        env |= local.airflow().environment()
    elif service.kind is Kind.SPARK_CONNECT:
        env |= spark_environment()
    return local.argv(service), env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("service", nargs="?", help="the service this container runs")
    parser.add_argument("--prepare-airflow", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    local = LocalRuntime(LabConfig())
    try:
        if args.prepare_airflow:
            local.airflow().prepare()
            return 0
        service = local.config.service(args.service or "")
        local._write_config(service)
        command, env = service_command(local, service)
    except (LabError, KeyError, AirflowSetupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if service.kind is Kind.POSTGRES and (user := local.postgres().run_as):
        _become(user)
    sys.stdout.flush()
    os.execve(command[0], command, {**os.environ, **env})


if __name__ == "__main__":
    sys.exit(main())

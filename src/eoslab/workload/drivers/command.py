"""`eoslab clients`: the Kafka clients the roles can run, made ready and listed."""

from __future__ import annotations

from typing import Annotated

import typer

from eoslab.clients import ClientError, parse_client
from eoslab.console import console, fail
from eoslab.workload.drivers.build import STAMP, clients_dir
from eoslab.workload.drivers.librdkafka import installable
from eoslab.workload.drivers.registry import prepare as prepare_client

app = typer.Typer(no_args_is_help=True)
DRIVER_FAMILIES = ("java", "franz-go")
"""The clients with a driver program, built into ``.venv-clients/<family>-<version>/``."""


@app.command()
def prepare(
    clients: Annotated[
        list[str], typer.Argument(help="Clients: java:3.9.2, franz-go:v1.22.2, librdkafka:2.2.0.")
    ],
) -> None:
    """Build (or check) each client's driver now, once per version; a run builds the ones it
    needs on first use anyway. Prints a line for each it builds; one line and exit 1 for one
    that cannot be had."""
    for name in clients:
        try:
            prepare_client(parse_client(name), lambda line: console.print(f"clients: {line}"))
        except ClientError as error:
            raise fail(error) from error


@app.command("list")
def list_() -> None:
    """The clients ready to run: librdkafka's releases and every driver built so far."""
    for version in installable():
        console.print(f"librdkafka:{version}")
    folder = clients_dir()
    for built in sorted(folder.glob("*/" + STAMP)) if folder.is_dir() else []:
        name = built.parent.name
        for family in DRIVER_FAMILIES:
            if name.startswith(f"{family}-"):
                console.print(f"{family}:{name.removeprefix(family + '-')}")

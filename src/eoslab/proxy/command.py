"""`eoslab chaos ...`: run the proxy, and drive a running one through its control API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from eoslab.console import USAGE_ERROR, fail
from eoslab.control.fault_log import FaultLog
from eoslab.control.http import ControlError, stop_on_signals
from eoslab.proxy.bootstrap_check import BootstrapError, check_bootstrap
from eoslab.proxy.control_api import control_api
from eoslab.proxy.control_client import ProxyControl
from eoslab.proxy.fronting import bootstrap_route
from eoslab.proxy.server import ChaosProxy, Route
from eoslab.settings import HOST, BasePort, HostPort

app = typer.Typer(help="The Kafka-aware chaos proxy.", no_args_is_help=True)
fault_app = typer.Typer(help="Faults of a running proxy.", no_args_is_help=True)
app.add_typer(fault_app, name="fault")

ControlUrl = Annotated[str, typer.Option("--control", help="Control API URL of the running proxy.")]
DEFAULT_URL = f"http://{HOST}:{BasePort.PROXY_CONTROL.value}"
T = TypeVar("T")


@app.command("proxy")
def run_proxy(
    route: Annotated[
        list[str],
        typer.Option(
            "--route",
            help="NAME=LISTEN_HOST:PORT=UPSTREAM_HOST:PORT, once per broker "
            "(e.g. kafka-1=127.0.0.1:9091=127.0.0.1:29091); port 0 picks a free one.",
        ),
    ],
    control: Annotated[str, typer.Option(help="HOST:PORT of the JSON control API.")] = str(
        HostPort.local(BasePort.PROXY_CONTROL)
    ),
    fault_log: Annotated[
        Path | None, typer.Option(help="Append every injected fault to this JSONL file.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the faults' random generators.")] = 0,
) -> None:
    """Forward Kafka traffic per route, injecting the faults posted to the control API."""
    try:
        routes = [Route.parse(text) for text in route]
        control_address = HostPort.parse(control)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    try:
        asyncio.run(_serve(routes, control_address, fault_log, seed))
    except OSError as error:
        print(f"chaos proxy: {error.strerror or error}", file=sys.stderr)
        raise typer.Exit(1) from None


@app.command("front")
def front_cluster(
    bootstrap: Annotated[
        str,
        typer.Option(
            help="HOST:PORT[,HOST:PORT...] of a Kafka cluster's PLAINTEXT listener "
            "(TLS and SASL are out of scope)."
        ),
    ],
    control: Annotated[
        str, typer.Option(help="HOST:PORT of the JSON control API (port 0: a free one).")
    ] = f"{HOST}:0",
    fault_log: Annotated[
        Path | None, typer.Option(help="Append every injected fault to this JSONL file.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the faults' random generators.")] = 0,
) -> None:
    """Front a Kafka cluster the lab does not run: every broker address it hands out
    (Metadata, FindCoordinator, DescribeCluster) is rewritten to a route of the proxy's
    (broker-<node id>, a free local port), so every client connection crosses the proxy and
    takes its faults. Prints "ready control=URL bootstrap=HOST:PORT,...": give clients that
    bootstrap. Plaintext only: TLS and SASL listeners are refused (out of scope)."""
    try:
        servers = [HostPort.parse(text) for text in bootstrap.split(",")]
        control_address = HostPort.parse(control)
    except ValueError as error:
        raise fail(f"--bootstrap/--control: {error}", code=USAGE_ERROR) from None
    try:
        check_bootstrap(servers)
    except BootstrapError as error:
        raise fail(f"bootstrap {error}") from None
    routes = [
        Route(bootstrap_route(index), HostPort(HOST, 0), server)
        for index, server in enumerate(servers, start=1)
    ]
    try:
        asyncio.run(_serve(routes, control_address, fault_log, seed, front=True))
    except OSError as error:
        print(f"chaos front: {error.strerror or error}", file=sys.stderr)
        raise typer.Exit(1) from None


async def _serve(
    routes: list[Route],
    control: HostPort,
    log_path: Path | None,
    seed: int,
    *,
    front: bool = False,
) -> None:
    fault_log = FaultLog(log_path)
    proxy = ChaosProxy(routes, seed, fault_log, front=front)
    api = control_api(proxy)
    stopping = stop_on_signals()
    try:
        await proxy.start()
        await api.start(control.host, control.port)
        if front:
            local = ",".join(str(proxy.listen_address(route.name)) for route in routes)
            listeners = f"bootstrap={local}"
        else:
            listeners = " ".join(f"{name}={proxy.listen_address(name)}" for name in proxy.routes)
        print(f"ready control={api.url} {listeners}", flush=True)
        await stopping.wait()
    finally:
        with contextlib.suppress(OSError):
            await api.stop()
        await proxy.stop()
        fault_log.close()


@fault_app.command("add")
def add_fault(
    spec: Annotated[
        str,
        typer.Argument(
            help='A fault spec as JSON, e.g. \'{"kind": "drop-response", "route": "kafka-1", '
            '"api": "Produce", "count": 3, "reset": true}\''
        ),
    ],
    control: ControlUrl = DEFAULT_URL,
) -> None:
    """Add a fault; prints its id."""
    try:
        body = json.loads(spec)
    except json.JSONDecodeError as error:
        raise typer.BadParameter(f"not JSON: {error}") from None
    typer.echo(_call(lambda: ProxyControl(control).add(body)))


@fault_app.command("list")
def list_faults(control: ControlUrl = DEFAULT_URL) -> None:
    """The faults in force, with their matched/injected counters."""
    _print_json(_call(ProxyControl(control).faults))


@fault_app.command("clear")
def clear_faults(
    fault_id: Annotated[str | None, typer.Argument(help="Only this fault.")] = None,
    control: ControlUrl = DEFAULT_URL,
) -> None:
    """Remove one fault, or all of them."""
    client = ProxyControl(control)
    _call(client.clear if fault_id is None else lambda: client.remove(fault_id))


@app.command("counters")
def show_counters(control: ControlUrl = DEFAULT_URL) -> None:
    """Frames and bytes per route and API, matched/injected per fault."""
    _print_json(_call(ProxyControl(control).counters))


def _call(action: Callable[[], T]) -> T:
    try:
        return action()
    except ControlError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    except OSError as error:
        typer.echo(f"control API unreachable: {error}", err=True)
        raise typer.Exit(1) from None


def _print_json(value: object) -> None:
    typer.echo(json.dumps(value, indent=2))


if __name__ == "__main__":  # `python -m eoslab.proxy.command front ...`: an external run's proxy
    app()

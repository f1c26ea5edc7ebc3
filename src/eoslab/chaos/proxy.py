"""Run the chaos proxy: `python -m eoslab.chaos.proxy --route NAME=LISTEN=UPSTREAM ...`.

The lab runtime starts exactly this command and waits for the line starting with "ready";
`eoslab chaos proxy` is the same function mounted in the CLI.
"""

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from eoslab.chaos.control_api import DEFAULT_CONTROL, ControlApi
from eoslab.chaos.fault_log import FaultLog
from eoslab.chaos.server import ChaosProxy, Endpoint, Route


def run_proxy(
    route: Annotated[
        list[str],
        typer.Option(
            "--route",
            help="NAME=LISTEN_HOST:PORT=UPSTREAM_HOST:PORT, once per broker "
            "(e.g. kafka-1=127.0.0.1:9091=127.0.0.1:29091); port 0 picks a free one.",
        ),
    ],
    control: Annotated[
        str, typer.Option(help="HOST:PORT of the JSON control API.")
    ] = DEFAULT_CONTROL,
    fault_log: Annotated[
        Path | None, typer.Option(help="Append every injected fault to this JSONL file.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the faults' random generators.")] = 0,
) -> None:
    """Forward Kafka traffic per route, injecting the faults posted to the control API."""
    try:
        routes = [Route.parse(text) for text in route]
        control_endpoint = Endpoint.parse(control)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    try:
        asyncio.run(_serve(routes, control_endpoint, fault_log, seed))
    except OSError as error:
        print(f"chaos proxy: {error.strerror or error}", file=sys.stderr)
        raise typer.Exit(1) from None


async def _serve(routes: list[Route], control: Endpoint, log_path: Path | None, seed: int) -> None:
    fault_log = FaultLog(log_path)
    proxy = ChaosProxy(routes, seed, fault_log)
    api = ControlApi(proxy, control.host, control.port)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await proxy.start()
        await api.start()
        listeners = " ".join(f"{name}={proxy.listen_address(name)}" for name in proxy.routes)
        print(f"ready control={api.url} {listeners}", flush=True)
        await stopping.wait()
    finally:
        with contextlib.suppress(OSError):
            await api.stop()
        await proxy.stop()
        fault_log.close()


def main() -> None:
    typer.run(run_proxy)


if __name__ == "__main__":
    main()

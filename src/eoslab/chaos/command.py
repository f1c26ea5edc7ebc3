"""`eoslab chaos ...`: run the proxy, and drive a running one through its control API."""

import json
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from eoslab.chaos.control_api import DEFAULT_CONTROL
from eoslab.chaos.control_client import ProxyControl
from eoslab.chaos.proxy import run_proxy
from eoslab.control_http import ControlError

app = typer.Typer(help="The Kafka-aware chaos proxy.", no_args_is_help=True)
fault_app = typer.Typer(help="Faults of a running proxy.", no_args_is_help=True)
app.add_typer(fault_app, name="fault")
app.command("proxy")(run_proxy)

ControlUrl = Annotated[str, typer.Option("--control", help="Control API URL of the running proxy.")]
DEFAULT_URL = f"http://{DEFAULT_CONTROL}"
T = TypeVar("T")


@fault_app.command("add")
def add_fault(
    spec: Annotated[
        str,
        typer.Argument(
            help='A fault spec as JSON, e.g. \'{"kind": "drop_response", "route": "kafka-1", '
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
